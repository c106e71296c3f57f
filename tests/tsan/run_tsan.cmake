# Configures tests/tsan with clang++ and -fsanitize=thread, builds it and runs
# it: any data race among the const readers fails the test.
# Inputs: CLANGXX, KILN_SOURCE_DIR, KILN_FIXTURES_DIR, WORK_DIR.
include(${CMAKE_CURRENT_LIST_DIR}/../cmake_step.cmake)
step(${CMAKE_COMMAND} -S "${KILN_SOURCE_DIR}/tests/tsan" -B "${WORK_DIR}" -G Ninja
     "-DCMAKE_CXX_COMPILER=${CLANGXX}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
     "-DKILN_SOURCE_DIR=${KILN_SOURCE_DIR}" "-DKILN_FIXTURES_DIR=${KILN_FIXTURES_DIR}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}")
step(${CMAKE_COMMAND} -E env "TSAN_OPTIONS=halt_on_error=1 exitcode=66" "${WORK_DIR}/test_const_readers")
