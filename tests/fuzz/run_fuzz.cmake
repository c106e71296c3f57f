# Builds tests/fuzz with clang and runs one harness for a bounded time from a
# seed corpus (a fresh copy, so the run adds nothing to the source tree).
# Inputs: CLANGXX, KILN_SOURCE_DIR, WORK_DIR, FUZZ_TARGET (fx_json, gzip, npy
# or compile_run), SEEDS (files, ';'-separated), SECONDS.
include(${CMAKE_CURRENT_LIST_DIR}/../cmake_step.cmake)
set(build "${WORK_DIR}/build")
step(${CMAKE_COMMAND} -S "${KILN_SOURCE_DIR}/tests/fuzz" -B "${build}" -G Ninja
     "-DCMAKE_CXX_COMPILER=${CLANGXX}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DKILN_SOURCE_DIR=${KILN_SOURCE_DIR}")
step(${CMAKE_COMMAND} --build "${build}" --target fuzz_${FUZZ_TARGET})
set(corpus "${WORK_DIR}/corpus_${FUZZ_TARGET}")
file(REMOVE_RECURSE "${corpus}")
file(MAKE_DIRECTORY "${corpus}")
foreach(seed ${SEEDS})
  get_filename_component(name "${seed}" NAME)
  if(FUZZ_TARGET STREQUAL "fx_json" AND name MATCHES "\\.gz$")
    # The JSON reader's seeds are the fixtures' documents, decompressed.
    execute_process(COMMAND gzip -dc "${seed}" OUTPUT_FILE "${corpus}/${name}.json" RESULT_VARIABLE rc)
  else()
    file(COPY "${seed}" DESTINATION "${corpus}")
  endif()
endforeach()
# Both targets that read fx-graph-json mutate with its keys and op names too.
set(dict "")
if(FUZZ_TARGET STREQUAL "fx_json" OR FUZZ_TARGET STREQUAL "compile_run")
  set(dict "-dict=${KILN_SOURCE_DIR}/tests/fuzz/fx_json.dict")
endif()
# A fixed seed and run count keep the run the same from one CI run to the next;
# the time bound keeps it short on a slow machine.
step("${build}/fuzz_${FUZZ_TARGET}" "${corpus}" -seed=1 -runs=3000000 -max_total_time=${SECONDS} -max_len=65536
     -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 ${dict})
