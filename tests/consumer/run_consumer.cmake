# Installs the kiln build tree into a scratch prefix, then configures, builds and
# runs tests/consumer against it with find_package(kiln).
# Inputs: KILN_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
include(${CMAKE_CURRENT_LIST_DIR}/../cmake_step.cmake)
step(${CMAKE_COMMAND} --install "${KILN_BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
if(NOT EXISTS "${WORK_DIR}/prefix/include/kiln/core/graph.hpp")
  message(FATAL_ERROR "install did not put the headers under include/kiln")
endif()
# No build type: the test proves the package is found, compiles and links; it
# measures nothing, and unoptimized it builds in a fraction of Release's time.
step(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build" "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
     -DCMAKE_BUILD_TYPE=)
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/consumer")
