// `moelab study submit`: one sbatch script per variant (a job array over the
// seeds) plus a report script, rendered from the templates in slurm/, then
// submitted with the report depending on every array (afterok).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "study/study_plan.h"
#include "study/study_spec.h"

namespace moelab {

struct SlurmJobScript {
  std::string name;    // variant name, or "report"
  std::string path;    // <out_root>/slurm/<name>.sbatch
  std::string parent;  // a staged variant's parent (its job must end well first)
};

// Writes the scripts (atomically) under <out_root>/slurm/, parents' stages
// first; the report script is last. `template_dir` holds study-variant.sbatch.in and
// study-report.sbatch.in.
std::vector<SlurmJobScript> write_slurm_scripts(const StudyPlan& plan, const SlurmSpec& slurm,
                                                const std::string& template_dir,
                                                const std::string& binary);

// Submits the variant scripts, a staged variant's with --dependency=afterok on
// its parent's job array (every seed's run), then the report with afterok on
// all of them; returns the job ids in the order of `scripts`.
std::vector<std::string> submit_slurm_scripts(const std::vector<SlurmJobScript>& scripts);

// `{{KEY}}` replaced by values[KEY]; InputError naming `source` for a key
// without a value or a value never used (template and code out of step).
std::string render_template(const std::string& text,
                            const std::map<std::string, std::string>& values,
                            const std::string& source);

// The job id in `sbatch --parsable` output ("123" or "123;cluster").
std::string parse_sbatch_job_id(const std::string& output);

}  // namespace moelab
