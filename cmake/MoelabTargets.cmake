# Helpers that give every moelab target the same flags and precompiled header.

function(moelab_compile_setup target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  target_precompile_headers(${target} REUSE_FROM moelab_pch)
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
  set(MOELAB_MODULES ${MOELAB_MODULES} moelab_${name} PARENT_SCOPE)
endfunction()
