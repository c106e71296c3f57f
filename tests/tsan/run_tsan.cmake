# Configures tests/tsan with clang++ and -fsanitize=thread, builds one of its
# programs and runs it: any data race fails the test.
# Inputs: CLANGXX, KILN_SOURCE_DIR, KILN_FIXTURES_DIR, WORK_DIR, TARGET
# (test_const_readers or test_compiled_graph_threads).
include(${CMAKE_CURRENT_LIST_DIR}/../cmake_step.cmake)
step(${CMAKE_COMMAND} -S "${KILN_SOURCE_DIR}/tests/tsan" -B "${WORK_DIR}" -G Ninja
     "-DCMAKE_CXX_COMPILER=${CLANGXX}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
     "-DKILN_SOURCE_DIR=${KILN_SOURCE_DIR}" "-DKILN_FIXTURES_DIR=${KILN_FIXTURES_DIR}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}" --target ${TARGET})
step(${CMAKE_COMMAND} -E env "TSAN_OPTIONS=halt_on_error=1 exitcode=66" "${WORK_DIR}/${TARGET}")
