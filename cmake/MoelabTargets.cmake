# Helpers that give every moelab target the same flags and precompiled header.

# Whether `file` includes a torch API header (<torch/...>), itself or through
# the quoted headers it includes (looked up beside it, in src/ and in tests/).
# ATen and c10 headers do not count: a header that only names tensors in its
# declarations includes <ATen/core/Tensor.h>, light enough to parse without
# the precompiled header. Memoised per file; a cycle counts as no.
function(moelab_includes_torch file out)
  get_property(known GLOBAL PROPERTY "moelab_torch:${file}" SET)
  if(NOT known)
    set_property(GLOBAL PROPERTY "moelab_torch:${file}" FALSE)
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include")
    get_filename_component(dir ${file} DIRECTORY)
    set(result FALSE)
    foreach(line ${includes})
      if(line MATCHES "<torch/")
        set(result TRUE)
      elseif(line MATCHES "\"([^\"]+)\"")
        foreach(base ${dir} ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
          if(EXISTS ${base}/${CMAKE_MATCH_1})
            moelab_includes_torch(${base}/${CMAKE_MATCH_1} result)
            break()
          endif()
        endforeach()
      endif()
      if(result)
        break()
      endif()
    endforeach()
    set_property(GLOBAL PROPERTY "moelab_torch:${file}" ${result})
  endif()
  get_property(result GLOBAL PROPERTY "moelab_torch:${file}")
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# The shared precompiled header (all of torch) goes only to the sources that
# include torch's API: loading it and compiling torch's inline code would cost a
# torch-free file more than its own code does. An answer gone stale since
# CMake last ran costs build time, never correctness.
function(moelab_compile_setup target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(uses_torch FALSE)
  foreach(source ${sources})
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${source_dir})
    set(includes_torch TRUE)  # a source generated later: as if it did
    if(EXISTS ${path})
      moelab_includes_torch(${path} includes_torch)
    endif()
    if(includes_torch)
      set(uses_torch TRUE)
    else()
      set_source_files_properties(${source} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
  if(uses_torch)
    target_precompile_headers(${target} REUSE_FROM moelab_pch)
  endif()
endfunction()

# A target's sources compiled in batches, one translation unit each: a fresh
# build parses the torch headers' inline code and instantiates their templates
# once a batch instead of once a file. An edit recompiles its whole batch, so
# incremental work may prefer -DMOELAB_UNITY_BUILD=OFF. The kernels stay one
# unit a file: their tuned code is compiled as it was measured.
function(moelab_unity_build target)
  if(MOELAB_UNITY_BUILD AND NOT target STREQUAL "moelab_kernels")
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE
                                               ${MOELAB_UNITY_BATCH})
    # A batch includes its sources, so GCC takes a class in one of them that
    # holds a type of its anonymous namespace for one in a header.
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
endfunction()

# moelab_module(name dep...): library moelab_<name> from src/<name>/*.cpp,
# linked to moelab_<dep> for each dep. Appends to MOELAB_MODULES.
function(moelab_module name)
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  if(NOT MOELAB_WITH_NCCL)
    list(FILTER sources EXCLUDE REGEX ".*/nccl_[^/]*\\.cpp$")
  endif()
  if(NOT sources AND NOT name STREQUAL "util")
    return()
  endif()
  add_library(moelab_${name} STATIC ${sources})
  target_include_directories(moelab_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(moelab_${name} PUBLIC moelab_deps)
  foreach(dep ${ARGN})
    if(TARGET moelab_${dep})
      target_link_libraries(moelab_${name} PUBLIC moelab_${dep})
    endif()
  endforeach()
  moelab_compile_setup(moelab_${name})
  moelab_unity_build(moelab_${name})
  set(MOELAB_MODULES ${MOELAB_MODULES} moelab_${name} PARENT_SCOPE)
endfunction()
