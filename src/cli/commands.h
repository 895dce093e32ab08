// Each subcommand lives in its own file and registers itself on the root app.
// Callbacks throw InputError for bad usage or input (exit 2); anything else
// that escapes is an internal failure (exit 1).
#pragma once

#include <CLI/CLI.hpp>

namespace moelab {

void add_config_command(CLI::App& root);
void add_params_command(CLI::App& root);
void add_prep_command(CLI::App& root);
void add_train_command(CLI::App& root);
void add_eval_command(CLI::App& root);
void add_analyze_command(CLI::App& root);
void add_tasks_command(CLI::App& root);
void add_study_command(CLI::App& root);
void add_report_command(CLI::App& root);
void add_upcycle_command(CLI::App& root);
void add_convert_command(CLI::App& root);
void add_export_command(CLI::App& root);
void add_import_command(CLI::App& root);

}  // namespace moelab
