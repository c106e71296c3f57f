# Builds one target of the build tree and checks the outcome (a compile-fail test):
#   cmake -DBUILD_DIR=<dir> -DTARGET=<target> -DEXPECT=fail -DEXPECT_TEXT=<text> -P expect_build.cmake
#   cmake -DBUILD_DIR=<dir> -DTARGET=<target> -DEXPECT=success -P expect_build.cmake
# or compiles one file with another compiler (the same check, for clang's wording):
#   cmake -DCOMPILER=<clang++> -DSOURCE=<file.cpp> -DINCLUDE_DIR=<include> -DEXPECT=... -P expect_build.cmake
# EXPECT=fail passes only when the build fails AND one of its error lines
# contains EXPECT_TEXT, so an unrelated build error cannot make the test pass.
# (CTest's WILL_FAIL would invert a PASS_REGULAR_EXPRESSION result too, so the
# check is done here instead.)
if(DEFINED COMPILER)
  set(_required SOURCE INCLUDE_DIR EXPECT)
  get_filename_component(TARGET ${SOURCE} NAME)
  set(_build ${COMPILER} -std=c++20 -I${INCLUDE_DIR} -fsyntax-only ${SOURCE})
else()
  set(_required BUILD_DIR TARGET EXPECT)
  set(_build ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET})
endif()
foreach(var ${_required})
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "expect_build.cmake: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${_build} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(EXPECT STREQUAL "fail")
  if(NOT DEFINED EXPECT_TEXT OR EXPECT_TEXT STREQUAL "")
    message(FATAL_ERROR "expect_build.cmake: EXPECT=fail needs -DEXPECT_TEXT=...")
  endif()
  if(rc EQUAL 0)
    message(FATAL_ERROR "${TARGET} compiled, but it must not")
  endif()
  # Only the compiler's error lines count (the source line it echoes under a
  # diagnostic may quote the text too).
  string(REGEX MATCHALL "[^\n]*error[^\n]*" error_lines "${out}")
  string(FIND "${error_lines}" "${EXPECT_TEXT}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "${TARGET} failed to build, but no error line says '${EXPECT_TEXT}'")
  endif()
  message(STATUS "${TARGET} failed to build, as it must, with '${EXPECT_TEXT}'")
elseif(EXPECT STREQUAL "success")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TARGET} failed to build (exit ${rc}), but it must compile")
  endif()
else()
  message(FATAL_ERROR "expect_build.cmake: EXPECT must be fail or success, not '${EXPECT}'")
endif()
