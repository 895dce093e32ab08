# Apache Arrow's C++ Parquet reader from the PyPI pyarrow wheel in the same
# Python as LibTorch (MOELAB_PYTHON): Debian 12 packages no libarrow. The wheel
# ships only versioned libraries (libarrow.so.NNNN), which are linked by full
# path, so nothing is written into site-packages. Both wheels use the C++11
# std::string ABI, as moelab does. Defines the interface target moelab_arrow.
execute_process(
  COMMAND ${MOELAB_PYTHON} -c
    "import pyarrow; print(pyarrow.get_include()); print(pyarrow.get_library_dirs()[0]); print(pyarrow.__version__)"
  OUTPUT_VARIABLE _pyarrow_paths OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_VARIABLE _pyarrow_error RESULT_VARIABLE _pyarrow_result)
if(NOT _pyarrow_result EQUAL 0)
  message(FATAL_ERROR "moelab: ${MOELAB_PYTHON} cannot import pyarrow (${_pyarrow_error}). "
                      "Run launch/install-deps.sh (pyarrow is pinned in launch/requirements.txt).")
endif()
string(REPLACE "\n" ";" _pyarrow_paths "${_pyarrow_paths}")
list(GET _pyarrow_paths 0 ARROW_INCLUDE_DIR)
list(GET _pyarrow_paths 1 _pyarrow_lib_dir)
list(GET _pyarrow_paths 2 ARROW_VERSION)
# The SONAME suffix is the major version times 100 plus the minor (25.0 -> 2500).
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${ARROW_VERSION}")
math(EXPR _arrow_so_version "${CMAKE_MATCH_1} * 100 + ${CMAKE_MATCH_2}")

add_library(moelab_arrow INTERFACE)
foreach(_lib arrow parquet)
  set(_path ${_pyarrow_lib_dir}/lib${_lib}.so.${_arrow_so_version})
  if(NOT EXISTS ${_path})
    message(FATAL_ERROR "moelab: pyarrow ${ARROW_VERSION} has no ${_path}")
  endif()
  target_link_libraries(moelab_arrow INTERFACE ${_path})
endforeach()
target_include_directories(moelab_arrow SYSTEM INTERFACE ${ARROW_INCLUDE_DIR})
message(STATUS "moelab: Arrow/Parquet ${ARROW_VERSION} from ${_pyarrow_lib_dir}")
