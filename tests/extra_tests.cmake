# Tests that are more than one doctest file each.

# export_fx.py's shape arguments for `shapes`, shapes split by "/":
# "2,3/4" -> --input-shape 2,3 --input-shape 4, in `out`.
function(kiln_input_shape_args out shapes)
  string(REPLACE "/" ";" shapes "${shapes}")
  set(args)
  foreach(shape ${shapes})
    list(APPEND args --input-shape ${shape})
  endforeach()
  set(${out} ${args} PARENT_SCOPE)
endfunction()

# A downstream project finds an installed kiln with find_package(kiln).
add_test(NAME consumer_find_package
  COMMAND ${CMAKE_COMMAND}
    -DKILN_BUILD_DIR=${PROJECT_BINARY_DIR}
    -DCONSUMER_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/consumer
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer_work
    -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer.cmake)
set_tests_properties(consumer_find_package PROPERTIES TIMEOUT 600 LABELS slow)

# Group/batch fusion on the fixtures checked by kiln's own executor: the graph
# before and after every pass on the same random inputs (kiln-opt --numeric-check).
if(TARGET kiln-opt AND KILN_HAVE_RUNTIME)
  foreach(_case
      "towers_n8_pregrad|batch_linear,batch_layernorm,batch_tanh,batch_relu,batch_sigmoid"
      "postgrad_net_pre|batch_linear_post_grad,batch_aten_add,batch_aten_mul,batch_aten_sub,batch_aten_div,batch_aten_tanh,batch_aten_sigmoid,batch_aten_relu"
      "splitcat_b_pregrad|normalization_pass,remove_split_with_size_one_pass")
    string(REPLACE "|" ";" _parts "${_case}")
    list(GET _parts 0 _graph)
    list(GET _parts 1 _passes)
    add_test(NAME kiln_numeric_check_${_graph}
      COMMAND kiln-opt ${KILN_FIXTURES_DIR}/inductor/${_graph}.json.gz --passes ${_passes} --numeric-check --quiet --counters)
    # Every pass fused something (its counter is there) and changed no output (exit status 0).
    set_tests_properties(kiln_numeric_check_${_graph} PROPERTIES TIMEOUT 300 PASS_REGULAR_EXPRESSION "\"total\":{\"[a-z]")
  endforeach()
endif()

# The quantization fixture's unfused PT2E graph (quantize/dequantize per tensor,
# int8 weights dequantized per channel, fp32 linears) runs on kiln's executor.
if(TARGET kiln-run AND KILN_HAVE_RUNTIME)
  add_test(NAME kiln_run_qmlp_unfused
    COMMAND kiln-run ${KILN_FIXTURES_DIR}/inductor/qmlp_exported.json.gz --random 1 --iterations 1 --warmup 0)
  set_tests_properties(kiln_run_qmlp_unfused PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "qmlp_exported.json.gz: 17 inputs, [0-9]+ steps")
endif()
# Dequant promotion on it changes no output and counts what Inductor 2.11 counted
# (qmlp.expected.json).
if(TARGET kiln-opt AND KILN_HAVE_RUNTIME)
  add_test(NAME kiln_numeric_check_qmlp_dequant_promotion
    COMMAND kiln-opt ${KILN_FIXTURES_DIR}/inductor/qmlp_exported.json.gz --passes dequant_promotion --numeric-check --quiet --counters)
  set_tests_properties(kiln_numeric_check_qmlp_dequant_promotion PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "\"total\":{\"dequant_promotion_matcher_count\":1,\"dequant_promotion_matcher_nodes\":2,")
endif()
# The whole quantization pipeline on it (prepack, unary and binary fusion into
# onednn.qlinear_pointwise) changes no output and counts what Inductor 2.11
# counted for its passes; pattern_matcher_* are Inductor's 20/52 less the 8
# one-node pointless_view matches on views of Inductor's own decomposition of
# aten.linear, which kiln's graph does not have.
if(TARGET kiln-opt AND KILN_HAVE_RUNTIME)
  add_test(NAME kiln_numeric_check_qmlp_quantization
    COMMAND kiln-opt ${KILN_FIXTURES_DIR}/inductor/qmlp_exported.json.gz --passes quantization --numeric-check --atol 1e-4 --quiet --counters)
  set_tests_properties(kiln_numeric_check_qmlp_quantization PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "\"total\":{\"dequant_promotion_matcher_count\":1,\"dequant_promotion_matcher_nodes\":2,\"pattern_matcher_count\":12,\"pattern_matcher_nodes\":44,\"qlinear_binary_lower_count\":1,\"qlinear_binary_lower_nodes\":1,\"qlinear_binary_matcher_count\":1,\"qlinear_binary_matcher_nodes\":4,\"qlinear_unary_lower_count\":3,\"qlinear_unary_lower_nodes\":3,\"qlinear_unary_matcher_count\":2,\"qlinear_unary_matcher_nodes\":10,\"qlinear_weight_prepack_matcher_count\":4,\"qlinear_weight_prepack_matcher_nodes\":24}"
    FAIL_REGULAR_EXPRESSION "error|mismatch")
endif()

# The int8-mixed-bf16 graphs autocast makes (tests/data/autocast: QuantConvNet at
# 2,3,16,16 and QuantMLP at 4,32, written on torch 2.11 by `tools/export_fx.py
# tests.python.quant_models:MODEL --level aten --quantize x86 --autocast bfloat16
# --seed 0`, with PyTorch's outputs under autocast): the quantization pipeline
# counts what Inductor 2.11 counted on the same graphs
# (bench/quantization/inductor_autocast_conv_2026-11-28_torch2.11.jsonl), but for
# pattern_matcher and the conv prepack's nodes (Inductor's weight clones, 3 nodes;
# QuantMLP: its unnecessary_dtype_convert match), and the fused graph gives
# PyTorch's outputs within bf16's error. The unfused graph (QuantConvNet's bf16
# convolutions included) gives PyTorch's outputs within two bf16 steps, and
# --numeric-check finds every pass's result within 4e-3 of the unfused graph's
# (two bf16 steps at the outputs' scale, under 0.5) on random inputs.
if(TARGET kiln-opt AND TARGET kiln-run AND KILN_HAVE_RUNTIME)
  foreach(_case "qconvnet|{\"dequant_promotion_matcher_count\":2,\"dequant_promotion_matcher_nodes\":2,\"pattern_matcher_count\":18,\"pattern_matcher_nodes\":53,\"qcat_matcher_count\":1,\"qcat_matcher_nodes\":4,\"qconv2d_binary_lower_count\":1,\"qconv2d_binary_lower_nodes\":1,\"qconv2d_binary_matcher_count\":1,\"qconv2d_binary_matcher_nodes\":3,\"qconv_unary_lower_count\":3,\"qconv_unary_lower_nodes\":3,\"qconv_unary_matcher_count\":3,\"qconv_unary_matcher_nodes\":9,\"qconv_weight_prepack_matcher_count\":4,\"qconv_weight_prepack_matcher_nodes\":20,\"qlinear_unary_lower_count\":1,\"qlinear_unary_lower_nodes\":1,\"qlinear_weight_prepack_matcher_count\":1,\"qlinear_weight_prepack_matcher_nodes\":6,\"qmaxpool2d_matcher_count\":1,\"qmaxpool2d_matcher_nodes\":4}" "qmlp|{\"dequant_promotion_matcher_count\":1,\"dequant_promotion_matcher_nodes\":2,\"pattern_matcher_count\":12,\"pattern_matcher_nodes\":46,\"qlinear_binary_lower_count\":1,\"qlinear_binary_lower_nodes\":1,\"qlinear_binary_matcher_count\":1,\"qlinear_binary_matcher_nodes\":4,\"qlinear_unary_lower_count\":3,\"qlinear_unary_lower_nodes\":3,\"qlinear_unary_matcher_count\":2,\"qlinear_unary_matcher_nodes\":12,\"qlinear_weight_prepack_matcher_count\":4,\"qlinear_weight_prepack_matcher_nodes\":24}")
    string(REPLACE "|" ";" _case "${_case}")
    list(GET _case 0 _model)
    list(GET _case 1 _counters)
    set(_dir ${CMAKE_CURRENT_SOURCE_DIR}/data/autocast/${_model})
    add_test(NAME kiln_opt_autocast_${_model}_counters
      COMMAND kiln-opt ${_dir}/graph.json --passes quantization --quiet --counters)
    set_tests_properties(kiln_opt_autocast_${_model}_counters PROPERTIES TIMEOUT 60
      PASS_REGULAR_EXPRESSION "\"total\":${_counters}}")
    add_test(NAME kiln_run_autocast_${_model}_quantization
      COMMAND kiln-run ${_dir} --passes quantization --compare ${_dir}/outputs --max-rel-err 3e-2 --threads 2 --iterations 1 --warmup 0)
    set_tests_properties(kiln_run_autocast_${_model}_quantization PROPERTIES TIMEOUT 60
      PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    add_test(NAME kiln_run_autocast_${_model}_unfused
      COMMAND kiln-run ${_dir} --compare ${_dir}/outputs --max-rel-err 1e-2 --threads 2 --iterations 1 --warmup 0)
    set_tests_properties(kiln_run_autocast_${_model}_unfused PROPERTIES TIMEOUT 60
      PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    add_test(NAME kiln_numeric_check_autocast_${_model}
      COMMAND kiln-opt ${_dir}/graph.json --passes quantization --numeric-check --atol 4e-3 --quiet)
    set_tests_properties(kiln_numeric_check_autocast_${_model} PROPERTIES TIMEOUT 60)
  endforeach()
endif()

# tools/export_fx.py against the PyTorch that scripts/install-deps.sh --with-torch
# installs (Debian's, for /usr/bin/python3), read back in C++.
find_program(KILN_TORCH_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT KILN_TORCH_PYTHON)
  find_program(KILN_TORCH_PYTHON NAMES python3)
endif()
set(KILN_HAVE_TORCH OFF)
if(KILN_TORCH_PYTHON)
  execute_process(COMMAND ${KILN_TORCH_PYTHON} -c "import torch" RESULT_VARIABLE torch_rc OUTPUT_QUIET ERROR_QUIET)
  if(torch_rc EQUAL 0)
    set(KILN_HAVE_TORCH ON)
  endif()
endif()
if(KILN_HAVE_TORCH)
  add_executable(test_exported_graph torch/test_exported_graph.cpp)
  target_link_libraries(test_exported_graph PRIVATE kiln::kiln kiln_doctest_main kiln_warnings kiln_test_optimization)
  foreach(level torch aten)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/export_${level})
    add_test(NAME export_fx_${level}
      COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py tests.python.small_model:SmallNet
              --input-shape 2,3,8,8 --level ${level} --seed 0 --out ${dir}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(export_fx_${level} PROPERTIES FIXTURES_SETUP exported_${level} LABELS torch TIMEOUT 300)
    add_test(NAME read_exported_${level} COMMAND test_exported_graph)
    set_tests_properties(read_exported_${level} PROPERTIES FIXTURES_REQUIRED exported_${level} LABELS torch
      ENVIRONMENT "KILN_EXPORT_DIR=${dir};KILN_EXPORT_LEVEL=${level}")
  endforeach()
  # --weights-cache: both levels' weight files hard links to one copy of their bytes,
  # and a later export without it writes new files instead of through the links.
  add_test(NAME export_fx_weights_cache
    COMMAND ${KILN_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_weights_cache.py ${CMAKE_CURRENT_BINARY_DIR}/export_weights_cache)
  set_tests_properties(export_fx_weights_cache PROPERTIES LABELS torch TIMEOUT 300 PASS_REGULAR_EXPRESSION "ok: [0-9]+ weight files in two exports")
  # A transformer (tests/python/bert_encoder.py, BERT's encoder in plain
  # torch.nn; two small layers here): its graph at both levels replays
  # PyTorch's eager result exactly, shape arithmetic and attention included.
  foreach(level torch aten)
    add_test(NAME export_fx_bert_tiny_${level}
      COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py tests.python.bert_encoder:BertTiny
              --input-shape 2,16,64 --level ${level} --seed 0 --out ${CMAKE_CURRENT_BINARY_DIR}/export_bert_tiny_${level}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(export_fx_bert_tiny_${level} PROPERTIES FIXTURES_SETUP exported_bert_tiny_${level}
      LABELS torch TIMEOUT 300 PASS_REGULAR_EXPRESSION "graph vs eager max abs diff 0[;)]")
  endforeach()
  # Group/batch fusion rewrites computed in PyTorch against the graphs they
  # rewrote (tests/python/run_fx_json.py), on the fixtures and on 600 towers
  # (two sets per fusion), until kiln's executor runs these ops.
  if(TARGET kiln-opt)
    set(_gbf_dir ${CMAKE_CURRENT_BINARY_DIR}/gbf_numeric)
    file(MAKE_DIRECTORY ${_gbf_dir})
    set(_pre batch_linear,batch_layernorm,batch_tanh,batch_relu,batch_sigmoid)
    set(_post batch_linear_post_grad,batch_aten_add,batch_aten_mul,batch_aten_sub,batch_aten_div,batch_aten_tanh,batch_aten_sigmoid,batch_aten_relu)
    foreach(_case "towers_n8_pregrad|${_pre}" "postgrad_net_pre|${_post}")
      string(REPLACE "|" ";" _parts "${_case}")
      list(GET _parts 0 _graph)
      list(GET _parts 1 _passes)
      add_test(NAME group_batch_fusion_numeric_${_graph}
        COMMAND sh -c "\"$1\" \"$2\" --passes $3 -o \"$4\" --quiet && \"$5\" \"$6\" \"$2\" \"$4\""
                sh $<TARGET_FILE:kiln-opt> ${KILN_FIXTURES_DIR}/inductor/${_graph}.json.gz ${_passes}
                ${_gbf_dir}/${_graph}_fused.json ${KILN_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/run_fx_json.py)
      set_tests_properties(group_batch_fusion_numeric_${_graph} PROPERTIES LABELS torch TIMEOUT 300
        PASS_REGULAR_EXPRESSION "\"within_tolerance\": true")
    endforeach()
    # The cases the fixtures do not cover, kiln's fixes of Inductor's rewrites
    # among them (tests/python/gbf_cases.py lists them).
    add_test(NAME group_batch_fusion_numeric_cases
      COMMAND ${KILN_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/gbf_cases.py $<TARGET_FILE:kiln-opt> ${_gbf_dir}/cases)
    set_tests_properties(group_batch_fusion_numeric_cases PROPERTIES LABELS torch TIMEOUT 300 FAIL_REGULAR_EXPRESSION "FAILED")
    # The check is not vacuous: with no tolerance at all the fused towers (whose
    # batched matmul rounds differently) must be reported as different.
    add_test(NAME group_batch_fusion_numeric_check_sees_rounding
      COMMAND ${KILN_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/run_fx_json.py
              ${KILN_FIXTURES_DIR}/inductor/towers_n8_pregrad.json.gz ${_gbf_dir}/towers_n8_pregrad_fused.json --rtol 0 --atol 0)
    set_tests_properties(group_batch_fusion_numeric_check_sees_rounding PROPERTIES LABELS torch TIMEOUT 300
      PASS_REGULAR_EXPRESSION "\"within_tolerance\": false" DEPENDS group_batch_fusion_numeric_towers_n8_pregrad)
  endif()
  # Whole models on kiln's executor against PyTorch eager's stored outputs
  # (export_fx.py writes them), at both levels: kiln-run --compare exits 1
  # on a mismatch. ResNet-50 with randomized batch-norms, BERT-base's encoder
  # (12 layers, hidden 768, sequence 128) and the zoo below, plus the small
  # models exported above.
  if(TARGET kiln-run)
    set(_models
      "resnet50|tests.python.vision_models:ResNet50|1,3,224,224"
      "bert_base|tests.python.bert_encoder:BertBase|1,128,768")
    # The zoo (label zoo), listed in tests/python/zoo_models.py: stock
    # torchvision classification models, their weights drawn there, at the
    # smallest input each takes, with AlexNet, Swin-T and two segmentation
    # models (a dict output) whose tests predate the list.
    execute_process(COMMAND ${KILN_TORCH_PYTHON} -c
        "from tests.python.zoo_models import ZOO; print(';'.join('|'.join(entry) for entry in ZOO))"
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _zoo_entries OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(_zoo)
    foreach(_entry ${_zoo_entries})
      list(APPEND _models "${_entry}")
      string(REGEX REPLACE "\\|.*" "" _name "${_entry}")
      list(APPEND _zoo ${_name})
    endforeach()
    # A model quantized by the x86 recipe (export_model_MODEL_x86, the fixture
    # model_MODEL_x86) and its int8 run after the quantization passes against
    # PyTorch's q/dq reference within TOL (kiln_run_MODEL_x86_int8); extra
    # arguments go to the exporter.
    function(kiln_x86_model_tests _model _factory _shape _tol _labels)
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_${_model}_x86)
      add_test(NAME export_model_${_model}_x86
        COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py ${_factory}
                --input-shape ${_shape} --level aten --quantize x86 --seed 0 ${ARGN} --out ${_dir}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(export_model_${_model}_x86 PROPERTIES
        FIXTURES_SETUP model_${_model}_x86 LABELS "${_labels}" TIMEOUT 600
        PASS_REGULAR_EXPRESSION "quantized vs float eager max abs diff")
      add_test(NAME kiln_run_${_model}_x86_int8
        COMMAND kiln-run ${_dir} --passes quantization --compare ${_dir}/outputs --max-rel-err ${_tol} --threads 2
                --iterations 1 --warmup 0)
      set_tests_properties(kiln_run_${_model}_x86_int8 PROPERTIES
        FIXTURES_REQUIRED model_${_model}_x86 LABELS "${_labels}" TIMEOUT 600
        PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    endfunction()
    # The two levels of a model hold the same weights: one copy of their bytes in
    # the cache, hard links in each export (about 2 GB less on disk for the zoo).
    set(_weights_cache ${CMAKE_CURRENT_BINARY_DIR}/weight_cache)
    foreach(_entry ${_models})
      string(REPLACE "|" ";" _parts "${_entry}")
      list(GET _parts 0 _model)
      list(GET _parts 1 _factory)
      list(GET _parts 2 _shape)
      set(_labels torch model)
      if(_model IN_LIST _zoo)
        list(APPEND _labels zoo)
      endif()
      foreach(level torch aten)
        set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_${_model}_${level})
        add_test(NAME export_model_${_model}_${level}
          COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py ${_factory}
                  --input-shape ${_shape} --level ${level} --seed 0 --weights-cache ${_weights_cache} --out ${_dir}
          WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
        set_tests_properties(export_model_${_model}_${level} PROPERTIES
          FIXTURES_SETUP model_${_model}_${level} LABELS "${_labels}" TIMEOUT 600)
        add_test(NAME kiln_run_${_model}_${level}
          COMMAND kiln-run ${_dir} --compare ${_dir}/outputs --max-rel-err 1e-4 --threads 2 --iterations 1 --warmup 0)
        set_tests_properties(kiln_run_${_model}_${level} PROPERTIES
          FIXTURES_REQUIRED model_${_model}_${level} LABELS "${_labels}" TIMEOUT 600
          PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
      endforeach()
      # The zoo quantized by the x86 recipe, on the int8 kernels after the
      # quantization passes, against PyTorch's q/dq reference. Not within one
      # step: PyTorch's own q/dq graph moves by up to 3.6e-2 of its output when
      # its activations move by 1e-6 before each quantize (another kernel's
      # float32 sums), Swin-V2-T's by 0.15 (bench/README, "the zoo quantized";
      # bench/quantization/qdq_sensitivity.py); kiln's errors sit within that.
      if(_model IN_LIST _zoo)
        set(_tol 5e-2)
        if(_model STREQUAL "swin_v2_t")
          set(_tol 0.2)
        endif()
        kiln_x86_model_tests(${_model} ${_factory} ${_shape} ${_tol} "${_labels}" --weights-cache ${_weights_cache})
      endif()
    endforeach()
    # int8 q/dq graphs by Inductor's x86 recipe (export_fx.py --quantize x86, aten
    # level) run unfused on kiln's executor against PyTorch's own quantize/dequantize
    # run of the same graph. ResNet-18's tolerance: kiln folds each residual add
    # into its conv as oneDNN's sum post-op, and oneDNN then runs that conv with
    # another kernel whose float32 sums differ from PyTorch's by ~1e-6 relative;
    # the first block already has a value that PyTorch quantizes at 40.50005
    # steps and kiln just below 40.5, one step apart, and such steps spread over
    # the blocks (2e-2 of the output's scale at the end; 1e-6 with every conv's
    # result kept as an output, which stops the fold).
    foreach(_entry
        "qmlp|tests.python.quant_models:QuantMLP|4,8,32|1e-5|conv=0,linear=4"
        "qconvnet|tests.python.quant_models:QuantConvNet|2,3,16,16|1e-5|conv=4,linear=1,cat=1,max_pool=1"
        "qconv1dnet|tests.python.quant_models:QuantConv1dNet|2,4,16|1e-5|conv=2,linear=1"
        "qresnet18|tests.python.vision_models:ResNet18|1,3,32,32|5e-2|conv=20,linear=1,max_pool=1"
        "qmobilenet_v2|tests.python.vision_models:MobileNetV2|1,3,32,32|1e-5|conv=52,linear=1")
      string(REPLACE "|" ";" _parts "${_entry}")
      list(GET _parts 0 _model)
      list(GET _parts 1 _factory)
      list(GET _parts 2 _shape)
      list(GET _parts 3 _tol)
      list(GET _parts 4 _expect)
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_${_model}_x86)
      # The graph after the quantization passes, on the int8 kernels (qconv,
      # qlinear, int8 max-pool and cat): PyTorch's outputs within 1e-5 of their
      # scale; on ResNet-18 closer than unfused, whose residual sums round apart.
      kiln_x86_model_tests(${_model} ${_factory} ${_shape} 1e-5 "torch;model")
      add_test(NAME kiln_run_${_model}_x86
        COMMAND kiln-run ${_dir} --compare ${_dir}/outputs --max-rel-err ${_tol} --threads 2 --iterations 1 --warmup 0)
      set_tests_properties(kiln_run_${_model}_x86 PROPERTIES
        FIXTURES_REQUIRED model_${_model}_x86 LABELS "torch;model" TIMEOUT 600
        PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
      # The recipe's form: q/dq pairs and int8 weights where they belong, shared scales.
      add_test(NAME check_quantized_graph_${_model}_x86
        COMMAND ${KILN_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_quantized_graph.py ${_dir} --expect ${_expect})
      set_tests_properties(check_quantized_graph_${_model}_x86 PROPERTIES
        FIXTURES_REQUIRED model_${_model}_x86 LABELS "torch;model" TIMEOUT 120 PASS_REGULAR_EXPRESSION "^ok ")
    endforeach()
    # The batch as slices of one sample, one thread each (--split-batch): the
    # quantized nets of batch 2 and 4 (the MLP's linears on [B*S, K] rows) after
    # the quantization passes, and BERT-tiny's attention, give PyTorch's outputs.
    foreach(_entry "qmlp|model_qmlp_x86|model_qmlp_x86|--passes;quantization"
                   "qconvnet|model_qconvnet_x86|model_qconvnet_x86|--passes;quantization"
                   "qconv1dnet|model_qconv1dnet_x86|model_qconv1dnet_x86|--passes;quantization"
                   "bert_tiny|export_bert_tiny_aten|exported_bert_tiny_aten|")
      string(REPLACE "|" ";" _parts "${_entry}")
      list(GET _parts 0 _model)
      list(GET _parts 1 _dir)
      list(GET _parts 2 _fixture)
      list(SUBLIST _parts 3 -1 _passes)
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/${_dir})
      add_test(NAME kiln_run_${_model}_split_batch
        COMMAND kiln-run ${_dir} ${_passes} --split-batch 1 --compare ${_dir}/outputs --max-rel-err 1e-5 --threads 2
                --iterations 2 --warmup 0)
      set_tests_properties(kiln_run_${_model}_split_batch PROPERTIES
        FIXTURES_REQUIRED ${_fixture} LABELS "torch;model" TIMEOUT 300
        PASS_REGULAR_EXPRESSION "batch split: [0-9]+ slices of 1.*compare with [^\n]*: match")
    endforeach()
    # Swin-T at batch 2: its window attention permutes the batch into dim 1 and
    # selects q, k and v back out of dim 0, which rebatch follows.
    if("swin_t" IN_LIST _zoo)
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_swin_t_b2_aten)
      add_test(NAME export_model_swin_t_b2_aten
        COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py torchvision.models:swin_t
                --input-shape 2,3,64,64 --level aten --seed 0 --weights-cache ${_weights_cache} --out ${_dir}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(export_model_swin_t_b2_aten PROPERTIES
        FIXTURES_SETUP model_swin_t_b2_aten LABELS "torch;model;zoo" TIMEOUT 600)
      add_test(NAME kiln_run_swin_t_split_batch
        COMMAND kiln-run ${_dir} --split-batch 1 --compare ${_dir}/outputs --max-rel-err 1e-4 --threads 2 --iterations 1 --warmup 0)
      set_tests_properties(kiln_run_swin_t_split_batch PROPERTIES
        FIXTURES_REQUIRED model_swin_t_b2_aten LABELS "torch;model;zoo" TIMEOUT 300
        PASS_REGULAR_EXPRESSION "batch split: 2 slices of 1.*compare with [^\n]*: match")
    endif()
    if(TARGET kiln-opt)
      # kiln-opt's quantization pipeline on model_MODEL_x86: outputs unchanged
      # (--numeric-check), and the "total" counters object matches PATTERN from its first field.
      function(kiln_quantization_counters_test _model _timeout _pattern)
        add_test(NAME kiln_numeric_check_${_model}_x86_quantization
          COMMAND kiln-opt ${CMAKE_CURRENT_BINARY_DIR}/model_${_model}_x86/graph.json --passes quantization
                  --numeric-check --atol 1e-4 --quiet --counters)
        set_tests_properties(kiln_numeric_check_${_model}_x86_quantization PROPERTIES
          FIXTURES_REQUIRED model_${_model}_x86 LABELS "torch;model" TIMEOUT ${_timeout}
          PASS_REGULAR_EXPRESSION "\"total\":{${_pattern}"
          FAIL_REGULAR_EXPRESSION "error|mismatch")
      endfunction()
      # Inductor's quantization passes on the exported MLP: every linear prepacked
      # and fused (relu, gelu, the residual add with relu), outputs unchanged, and
      # the counters the qmlp fixture (the same graph from torch.export) gives.
      kiln_quantization_counters_test(qmlp 120
        "\"dequant_promotion_matcher_count\":1,\"dequant_promotion_matcher_nodes\":2,\"pattern_matcher_count\":12,\"pattern_matcher_nodes\":44,\"qlinear_binary_lower_count\":1,\"qlinear_binary_lower_nodes\":1,\"qlinear_binary_matcher_count\":1,\"qlinear_binary_matcher_nodes\":4,\"qlinear_unary_lower_count\":3,\"qlinear_unary_lower_nodes\":3,\"qlinear_unary_matcher_count\":2,\"qlinear_unary_matcher_nodes\":10,\"qlinear_weight_prepack_matcher_count\":4,\"qlinear_weight_prepack_matcher_nodes\":24}")
      # QuantConvNet: the max-pool and the cat keep their int8 tensors (Inductor
      # counted qmaxpool2d 1 and qcat 1 on this net), after promoting the two
      # dequantizes read twice and prepacking its four convs; three convs take in
      # relu and their output quantize, the last its residual add and relu (float
      # out); outputs unchanged. Every counter is Inductor 2.11's but the
      # prepack's nodes and so pattern_matcher_nodes (its graph clones three
      # weights: 15 and 46 there, see bench/README.md).
      kiln_quantization_counters_test(qconvnet 120
        "\"dequant_promotion_matcher_count\":2,\"dequant_promotion_matcher_nodes\":2,\"pattern_matcher_count\":18,\"pattern_matcher_nodes\":43,\"qcat_matcher_count\":1,\"qcat_matcher_nodes\":4,\"qconv2d_binary_lower_count\":1,\"qconv2d_binary_lower_nodes\":1,\"qconv2d_binary_matcher_count\":1,\"qconv2d_binary_matcher_nodes\":3,\"qconv_unary_lower_count\":3,\"qconv_unary_lower_nodes\":3,\"qconv_unary_matcher_count\":3,\"qconv_unary_matcher_nodes\":9,\"qconv_weight_prepack_matcher_count\":4,\"qconv_weight_prepack_matcher_nodes\":12,\"qlinear_unary_lower_count\":1,\"qlinear_unary_lower_nodes\":1,\"qlinear_weight_prepack_matcher_count\":1,\"qlinear_weight_prepack_matcher_nodes\":4,\"qmaxpool2d_matcher_count\":1,\"qmaxpool2d_matcher_nodes\":4}")
      # QuantConv1dNet: 1-d convolutions are prepacked and fused as 2-d ones (Inductor
      # 2.11 takes 3-d and 4-d tensors); every counter is Inductor's on this graph
      # (bench/README), whose own compiled model then fails where it runs (its 1-d
      # kernel refuses the fused sum + relu). kiln's fused graph runs it, unchanged.
      kiln_quantization_counters_test(qconv1dnet 120
        "\"dequant_promotion_matcher_count\":1,\"dequant_promotion_matcher_nodes\":1,\"pattern_matcher_count\":9,\"pattern_matcher_nodes\":20,\"qconv2d_binary_lower_count\":1,\"qconv2d_binary_lower_nodes\":1,\"qconv2d_binary_matcher_count\":1,\"qconv2d_binary_matcher_nodes\":3,\"qconv_unary_lower_count\":1,\"qconv_unary_lower_nodes\":1,\"qconv_unary_matcher_count\":1,\"qconv_unary_matcher_nodes\":3,\"qconv_weight_prepack_matcher_count\":2,\"qconv_weight_prepack_matcher_nodes\":6,\"qlinear_unary_lower_count\":1,\"qlinear_unary_lower_nodes\":1,\"qlinear_weight_prepack_matcher_count\":1,\"qlinear_weight_prepack_matcher_nodes\":4}")
      # On the conv nets the pipeline promotes every dequantize read twice (a block's
      # input, read by its conv and its residual add, or by its conv and the
      # downsample), prepacks every conv (three nodes each: the two dequantizes
      # and the conv, where Inductor's graph sometimes holds a weight clone too),
      # fuses every conv's post-ops and output quantize, Inductor 2.11's counts:
      # ResNet-18's 12 unary (9 relu, 3 downsamples; 33 nodes) and 8 residual
      # sums with relu (40 nodes), MobileNetV2's 42 unary (35 relu6 as hardtanh,
      # which Inductor counts as clamp_min + clamp_max; 154 nodes) and 10 sums
      # (40 nodes), and the lower counters, one a fused conv.
      foreach(_case "qresnet18|8|20|12|33|8|40" "qmobilenet_v2|10|52|42|154|10|40")
        string(REPLACE "|" ";" _parts "${_case}")
        list(GET _parts 0 _model)
        list(GET _parts 1 _promoted)
        list(GET _parts 2 _convs)
        list(GET _parts 3 _unary)
        list(GET _parts 4 _unary_nodes)
        list(GET _parts 5 _binary)
        list(GET _parts 6 _binary_nodes)
        math(EXPR _conv_nodes "${_convs} * 3")
        set(_fused "\"qconv2d_binary_lower_count\":${_binary},\"qconv2d_binary_lower_nodes\":${_binary},")
        string(APPEND _fused "\"qconv2d_binary_matcher_count\":${_binary},\"qconv2d_binary_matcher_nodes\":${_binary_nodes},")
        string(APPEND _fused "\"qconv_unary_lower_count\":${_unary},\"qconv_unary_lower_nodes\":${_unary},")
        string(APPEND _fused "\"qconv_unary_matcher_count\":${_unary},\"qconv_unary_matcher_nodes\":${_unary_nodes},")
        kiln_quantization_counters_test(${_model} 300
          "\"dequant_promotion_matcher_count\":${_promoted},[^}]*${_fused}\"qconv_weight_prepack_matcher_count\":${_convs},\"qconv_weight_prepack_matcher_nodes\":${_conv_nodes},\"qlinear_unary_lower_count\":1,[^}]*\"qlinear_weight_prepack_matcher_count\":1,")
      endforeach()
    endif()
    # Weight-only int8 in bfloat16 (tests/python/quant_models.py WoqMLP): its two
    # products, one F.linear(x, w.to(x.dtype)) * s over a 3-d input and one
    # mm(x, w.t().to(x.dtype)) * s, become _weight_int8pack_mm (Inductor's woq
    # forms 1 and 4: 6 and 4 nodes). The unfused bfloat16 graph gives PyTorch's
    # answer within one bfloat16 step at the output's scale, the lowered one
    # within two (it rounds each product once, PyTorch twice). The numeric
    # check's atol is two steps at the output's scale (about 360 on its random
    # inputs): elements near zero are differences of large sums and carry the
    # error of the large ones.
    set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_woq_mlp)
    add_test(NAME export_model_woq_mlp
      COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py tests.python.quant_models:WoqMLP
              --input-shape 2,5,64 --dtype bfloat16 --level aten --seed 0 --out ${_dir}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(export_model_woq_mlp PROPERTIES FIXTURES_SETUP model_woq_mlp LABELS "torch;model" TIMEOUT 300)
    add_test(NAME kiln_run_woq_mlp
      COMMAND kiln-run ${_dir} --compare ${_dir}/outputs --max-rel-err 6e-3 --threads 2 --iterations 1 --warmup 0)
    set_tests_properties(kiln_run_woq_mlp PROPERTIES FIXTURES_REQUIRED model_woq_mlp LABELS "torch;model" TIMEOUT 300
      PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    add_test(NAME kiln_run_woq_mlp_int8
      COMMAND kiln-run ${_dir} --passes quantization --compare ${_dir}/outputs --max-rel-err 1e-2 --threads 2
              --iterations 1 --warmup 0)
    set_tests_properties(kiln_run_woq_mlp_int8 PROPERTIES FIXTURES_REQUIRED model_woq_mlp LABELS "torch;model" TIMEOUT 300
      PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    if(TARGET kiln-opt)
      add_test(NAME kiln_numeric_check_woq_mlp
        COMMAND kiln-opt ${_dir}/graph.json --passes woq_int8 --numeric-check --rtol 1e-2 --atol 4 --quiet --counters)
      set_tests_properties(kiln_numeric_check_woq_mlp PROPERTIES FIXTURES_REQUIRED model_woq_mlp LABELS "torch;model"
        TIMEOUT 300 PASS_REGULAR_EXPRESSION "\"total\":{[^}]*\"woq_matcher_count\":2,\"woq_matcher_nodes\":10"
        FAIL_REGULAR_EXPRESSION "error|mismatch|woq_skipped")
    endif()
    # fuse_conv_bn folds all 53 batch-norms of ResNet-50 into new weights, at both
    # levels (F.batch_norm; aten's batch-norm + getitem), and the folded model
    # still matches PyTorch's outputs. The numeric check's atol: the output's
    # scale is about 82, and a fold in float32 (PyTorch's) moves elements near
    # zero by up to 5e-5 (PyTorch's own fold of this model, against its unfused
    # run: 2.7e-5 in float32, 4.6e-5 in float64), past the default 1e-5; 5e-4 is
    # 6e-6 of the scale.
    foreach(level torch aten)
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_resnet50_${level})
      add_test(NAME fuse_conv_bn_resnet50_${level}
        COMMAND kiln-opt ${_dir}/graph.json --passes fuse_conv_bn --numeric-check --atol 5e-4 --counters --print
                -o ${_dir}/conv_bn_folded.json)
      set_tests_properties(fuse_conv_bn_resnet50_${level} PROPERTIES
        FIXTURES_REQUIRED model_resnet50_${level} LABELS "torch;model" TIMEOUT 600
        PASS_REGULAR_EXPRESSION "\"fuse_conv_bn\":53[,}]" FAIL_REGULAR_EXPRESSION "batch_norm|fuse_conv_bn_no_weights")
      add_test(NAME kiln_run_resnet50_${level}_fuse_conv_bn
        COMMAND kiln-run ${_dir} --passes fuse_conv_bn --compare ${_dir}/outputs --max-rel-err 1e-4 --threads 2
                --iterations 1 --warmup 0)
      set_tests_properties(kiln_run_resnet50_${level}_fuse_conv_bn PROPERTIES
        FIXTURES_REQUIRED model_resnet50_${level} LABELS "torch;model" TIMEOUT 600
        PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    endforeach()
    # --level export: torch.export's form, parameters and buffers lifted to
    # placeholders bound to weights. They are constants everywhere: kiln-run
    # takes the one real input (and draws only it with --random), and
    # fuse_conv_bn folds all 20 batch-norms of ResNet-18 under the numeric check.
    set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_resnet18_export)
    add_test(NAME export_model_resnet18_export
      COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py torchvision.models:resnet18
              --input-shape 1,3,64,64 --level export --seed 0 --out ${_dir}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(export_model_resnet18_export PROPERTIES
      FIXTURES_SETUP model_resnet18_export LABELS "torch;model" TIMEOUT 600
      PASS_REGULAR_EXPRESSION "122 weights, 1 inputs")
    add_test(NAME kiln_run_resnet18_export
      COMMAND kiln-run ${_dir} --compare ${_dir}/outputs --max-rel-err 1e-4 --threads 2 --iterations 1 --warmup 0)
    add_test(NAME kiln_run_resnet18_export_random
      COMMAND kiln-run ${_dir} --random 3 --threads 2 --iterations 1 --warmup 0)
    add_test(NAME kiln_run_resnet18_export_fuse_conv_bn
      COMMAND kiln-run ${_dir} --passes fuse_conv_bn --compare ${_dir}/outputs --max-rel-err 1e-4 --threads 2
              --iterations 1 --warmup 0)
    set_tests_properties(kiln_run_resnet18_export kiln_run_resnet18_export_fuse_conv_bn PROPERTIES
      PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    add_test(NAME fuse_conv_bn_resnet18_export
      COMMAND kiln-opt ${_dir}/graph.json --passes fuse_conv_bn --numeric-check --atol 5e-4 --counters
              -o ${_dir}/conv_bn_folded.json)
    set_tests_properties(kiln_run_resnet18_export_random PROPERTIES PASS_REGULAR_EXPRESSION ": 1 input, ")
    set_tests_properties(fuse_conv_bn_resnet18_export PROPERTIES PASS_REGULAR_EXPRESSION "\"fuse_conv_bn\":20[,}]")
    set_tests_properties(kiln_run_resnet18_export kiln_run_resnet18_export_random kiln_run_resnet18_export_fuse_conv_bn
                         fuse_conv_bn_resnet18_export PROPERTIES
      FIXTURES_REQUIRED model_resnet18_export LABELS "torch;model" TIMEOUT 600)
    foreach(level torch aten)
      add_test(NAME kiln_run_small_cnn_${level}
        COMMAND kiln-run ${CMAKE_CURRENT_BINARY_DIR}/export_${level} --compare ${CMAKE_CURRENT_BINARY_DIR}/export_${level}/outputs --iterations 1)
      set_tests_properties(kiln_run_small_cnn_${level} PROPERTIES FIXTURES_REQUIRED exported_${level} LABELS torch
        PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
      add_test(NAME kiln_run_bert_tiny_${level}
        COMMAND kiln-run ${CMAKE_CURRENT_BINARY_DIR}/export_bert_tiny_${level} --compare ${CMAKE_CURRENT_BINARY_DIR}/export_bert_tiny_${level}/outputs --iterations 1)
      set_tests_properties(kiln_run_bert_tiny_${level} PROPERTIES FIXTURES_REQUIRED exported_bert_tiny_${level} LABELS torch
        PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    endforeach()
    # shard_parameters under mpirun (with MPI only): every weight sharded over the
    # ranks and all-gathered before its first use, unbucketed and bucketed by
    # bucket_fsdp_all_gather, gives PyTorch's outputs. ResNet-18 at 32x32 (aten
    # level, 102 weights) and BERT-tiny (above, 32 weights) at 2 and 4 ranks.
    if(KILN_HAVE_MPI AND MPIEXEC_EXECUTABLE)
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/model_resnet18_32_aten)
      add_test(NAME export_model_resnet18_32_aten
        COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py torchvision.models:resnet18
                --input-shape 1,3,32,32 --level aten --seed 0 --out ${_dir}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(export_model_resnet18_32_aten PROPERTIES
        FIXTURES_SETUP model_resnet18_32_aten LABELS "torch;model" TIMEOUT 600)
      set(_sharded_runs
        "resnet18|${_dir}|model_resnet18_32_aten|102|2"
        "resnet18|${_dir}|model_resnet18_32_aten|102|4")
      foreach(level torch aten)
        list(APPEND _sharded_runs
          "bert_tiny_${level}|${CMAKE_CURRENT_BINARY_DIR}/export_bert_tiny_${level}|exported_bert_tiny_${level}|32|2"
          "bert_tiny_${level}|${CMAKE_CURRENT_BINARY_DIR}/export_bert_tiny_${level}|exported_bert_tiny_${level}|32|4")
      endforeach()
      # The same model exported as two shards per weight (--shards 2): each of 2
      # ranks reads its own files; 4 ranks read pieces of them; one process joins them.
      set(_sdir ${CMAKE_CURRENT_BINARY_DIR}/model_resnet18_32_aten_shards2)
      add_test(NAME export_model_resnet18_32_aten_shards2
        COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py torchvision.models:resnet18
                --input-shape 1,3,32,32 --level aten --seed 0 --shards 2 --out ${_sdir}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(export_model_resnet18_32_aten_shards2 PROPERTIES
        FIXTURES_SETUP model_resnet18_32_aten_shards2 LABELS "torch;model" TIMEOUT 600)
      add_test(NAME kiln_run_resnet18_shards2_joined
        COMMAND kiln-run ${_sdir} --compare ${_sdir}/outputs --max-rel-err 1e-4 --iterations 1 --warmup 0)
      set_tests_properties(kiln_run_resnet18_shards2_joined PROPERTIES FIXTURES_REQUIRED model_resnet18_32_aten_shards2
        LABELS "torch;model" PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
      list(APPEND _sharded_runs
        "resnet18_shards2|${_sdir}|model_resnet18_32_aten_shards2|102|2"
        "resnet18_shards2|${_sdir}|model_resnet18_32_aten_shards2|102|4")
      foreach(_run ${_sharded_runs})
        string(REPLACE "|" ";" _parts "${_run}")
        list(GET _parts 0 _model)
        list(GET _parts 1 _mdir)
        list(GET _parts 2 _fixture)
        list(GET _parts 3 _weights)
        list(GET _parts 4 _np)
        foreach(_bucketed "" ",bucket_fsdp_all_gather")
          set(_name kiln_run_${_model}_sharded_np${_np})
          if(_bucketed)
            set(_name ${_name}_bucketed)
          endif()
          add_test(NAME ${_name}
            COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_np} --oversubscribe ${MPIEXEC_PREFLAGS}
                    $<TARGET_FILE:kiln-run> ${_mdir} --passes shard_parameters${_bucketed} --compare ${_mdir}/outputs
                    --max-rel-err 1e-4 --iterations 1 --warmup 0 ${MPIEXEC_POSTFLAGS})
          set_tests_properties(${_name} PROPERTIES FIXTURES_REQUIRED ${_fixture} LABELS "torch;model" TIMEOUT 600
            PASS_REGULAR_EXPRESSION "\"shard_parameters_sharded\":${_weights}[^\n]*\ncompare with [^\n]*: match"
            ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
        endforeach()
      endforeach()
    endif()
  endif()
    # Op forms beyond ResNet's and BERT's (tests/python/op_coverage.py): N-d and
    # transposed convolution, pooling with indices or uneven windows, layer
    # norm's statistics, resizing in every mode, against PyTorch eager's outputs.
    set(_coverage
      "conv_pool|ConvPoolNet|torch|2,4,33/1,3,5,7,6/2,3,7,33"
      "conv_pool|ConvPoolNet|aten|2,4,33/1,3,5,7,6/2,3,7,33"
      "layer_norm_stats|LayerNormStats|aten|2,7,33"
      "resize|ResizeNet|torch|2,3,9,7/2,3,7/1,2,3,4,5"
      "resize|ResizeNet|aten|2,3,9,7/2,3,7/1,2,3,4,5")
    foreach(_entry ${_coverage})
      string(REPLACE "|" ";" _parts "${_entry}")
      list(GET _parts 0 _name)
      list(GET _parts 1 _factory)
      list(GET _parts 2 _level)
      list(GET _parts 3 _shapes)
      kiln_input_shape_args(_shape_args "${_shapes}")
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/export_${_name}_${_level})
      add_test(NAME export_op_coverage_${_name}_${_level}
        COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py tests.python.op_coverage:${_factory}
                ${_shape_args} --level ${_level} --seed 0 --out ${_dir}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(export_op_coverage_${_name}_${_level} PROPERTIES FIXTURES_SETUP op_coverage_${_name}_${_level}
        LABELS torch TIMEOUT 300)
      add_test(NAME kiln_run_op_coverage_${_name}_${_level}
        COMMAND kiln-run ${_dir} --compare ${_dir}/outputs --iterations 1 --warmup 0)
      set_tests_properties(kiln_run_op_coverage_${_name}_${_level} PROPERTIES FIXTURES_REQUIRED op_coverage_${_name}_${_level}
        LABELS torch TIMEOUT 300 PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    endforeach()
  # Exports FACTORY at LEVEL (export_NAME_LEVEL) and compares kiln-run's
  # outputs with PyTorch's (kiln_run_NAME_LEVEL); EXPORT_REGEX: what the
  # export must print.
  # SHAPE may hold several input shapes split by "/"; LEAF_MODULES: exported at
  # torch level with those modules kept as call_module nodes (LEVEL names the test).
  function(kiln_export_and_compare name factory shape level)
    cmake_parse_arguments(PARSE_ARGV 4 _opt "" "EXPORT_REGEX;LEAF_MODULES" "")
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/export_${name}_${level})
    kiln_input_shape_args(_shape_args "${shape}")
    if(_opt_LEAF_MODULES)
      set(_level_args --level torch --leaf-modules ${_opt_LEAF_MODULES})
    else()
      set(_level_args --level ${level})
    endif()
    add_test(NAME export_${name}_${level}
      COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py ${factory}
              ${_shape_args} ${_level_args} --seed 0 --out ${dir}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(export_${name}_${level} PROPERTIES FIXTURES_SETUP ${name}_${level} LABELS torch TIMEOUT 300)
    if(_opt_EXPORT_REGEX)
      set_tests_properties(export_${name}_${level} PROPERTIES PASS_REGULAR_EXPRESSION "${_opt_EXPORT_REGEX}")
    endif()
    add_test(NAME kiln_run_${name}_${level} COMMAND kiln-run ${dir} --compare ${dir}/outputs --iterations 1 --warmup 0)
    set_tests_properties(kiln_run_${name}_${level} PROPERTIES FIXTURES_REQUIRED ${name}_${level}
      LABELS torch TIMEOUT 300 PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
  endfunction()
  # torch.nn's attention layers, stock (tests/python/attention_models.py): a
  # TransformerEncoder of two layers (its optional masks are no inputs), a
  # small torchvision VisionTransformer, a sequence-first
  # MultiheadAttention returning its averaged weights and a
  # TransformerDecoderLayer (self- and cross-attention), at both levels. At aten
  # level the batch-first ones are PyTorch's fused _transformer_encoder_layer_fwd
  # and _native_multi_head_attention, the sequence-first one its decomposition.
  if(TARGET kiln-run)
    set(_attention
      "encoder|Encoder|2,10,32"
      "small_vit|SmallViT|2,3,32,32"
      "self_attention_seq_first|SelfAttentionSeqFirst|6,2,32"
      "decoder_layer|DecoderLayer|2,10,32")
    foreach(_entry ${_attention})
      string(REPLACE "|" ";" _parts "${_entry}")
      list(GET _parts 0 _name)
      list(GET _parts 1 _factory)
      list(GET _parts 2 _shape)
      foreach(level torch aten)
        kiln_export_and_compare(attention_${_name} tests.python.attention_models:${_factory} ${_shape} ${level})
      endforeach()
    endforeach()
    # torch.nn's recurrent layers (tests/python/recurrent_models.py): torch.fx
    # cannot trace them, so the exporter says so and takes them at aten level,
    # every time step unrolled (gates by unsafe_split, outputs stacked, then
    # transpose_ in place for batch-first).
    foreach(_name GRU LSTM RNN)
      kiln_export_and_compare(recurrent_${_name} tests.python.recurrent_models:${_name} 2,5,8 torch
                              EXPORT_REGEX "exported at aten level instead")
    endforeach()
  endif()
  # Models whose torch.nn layers stay call_module nodes (--leaf-modules with
  # tests/python/module_models.py's list, as torch.fx.symbolic_trace keeps every
  # torch.nn module): kiln-run runs them through the call_module kernels and
  # compares with PyTorch eager.
  if(TARGET kiln-run)
    execute_process(COMMAND ${KILN_TORCH_PYTHON} -c "from tests.python.module_models import LEAF_MODULES; print(LEAF_MODULES)"
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _leaf_modules OUTPUT_STRIP_TRAILING_WHITESPACE)
    foreach(_entry "VisionNet|2,3,33,31" "SeqVolNet|2,13/1,2,5,7,6" "UpsampleNet|2,3,9,7/2,3,7/1,2,3,4,5")
      string(REPLACE "|" ";" _parts "${_entry}")
      list(GET _parts 0 _factory)
      list(GET _parts 1 _shapes)
      kiln_input_shape_args(_shape_args "${_shapes}")
      set(_dir ${CMAKE_CURRENT_BINARY_DIR}/export_modules_${_factory})
      add_test(NAME export_modules_${_factory}
        COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py tests.python.module_models:${_factory}
                ${_shape_args} --level torch --leaf-modules ${_leaf_modules} --seed 0 --out ${_dir}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(export_modules_${_factory} PROPERTIES FIXTURES_SETUP modules_${_factory} LABELS torch TIMEOUT 300)
      add_test(NAME kiln_run_modules_${_factory}
        COMMAND kiln-run ${_dir} --compare ${_dir}/outputs --iterations 1 --warmup 0)
      set_tests_properties(kiln_run_modules_${_factory} PROPERTIES FIXTURES_REQUIRED modules_${_factory}
        LABELS torch TIMEOUT 300 PASS_REGULAR_EXPRESSION "compare with [^\n]*: match")
    endforeach()
  endif()
  # Stock torch.nn layers beyond those above (tests/python/layer_models.py):
  # group and instance norms and the other norms, the remaining activations,
  # padding modes, shuffles, LP pooling and flip, the pooling, transposed
  # convolution, distance, like-factory and einsum forms of PoolDistanceNet,
  # Fold/Unfold and Bilinear, PoolConvNet's circular Conv (copy_ into slices
  # of new_empty at aten level); at torch and aten level and as call_module leaves.
  if(TARGET kiln-run)
    execute_process(COMMAND ${KILN_TORCH_PYTHON} -c "from tests.python.layer_models import LEAF_MODULES; print(LEAF_MODULES)"
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _layer_leaves OUTPUT_STRIP_TRAILING_WHITESPACE)
    foreach(_entry "NormNet|2,6,5,7/2,6,9/1,4,3,4,5" "ActivationNet|2,6,5,7" "PadShuffleNet|2,4,6,8/2,4,7/1,2,3,4,5"
                   "PoolDistanceNet|2,4,6,8/2,4,7/1,4,4,4,5" "FoldBilinearNet|2,3,7,6/2,4,6"
                   "PoolConvNet|2,4,6,8/2,4,8/1,4,4,4,5")
      string(REPLACE "|" ";" _parts "${_entry}")
      list(GET _parts 0 _factory)
      list(GET _parts 1 _shapes)
      foreach(level torch aten)
        kiln_export_and_compare(layers_${_factory} tests.python.layer_models:${_factory} ${_shapes} ${level})
      endforeach()
      kiln_export_and_compare(layers_${_factory} tests.python.layer_models:${_factory} ${_shapes} leaf
                              LEAF_MODULES ${_layer_leaves})
    endforeach()
  endif()
  # --leaf-modules keeps the conv and the linear as call_module nodes: the
  # exporter must then write the "modules" table.
  add_executable(test_exported_modules torch/test_exported_modules.cpp)
  target_link_libraries(test_exported_modules PRIVATE kiln::kiln kiln_doctest_main kiln_warnings kiln_test_optimization)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/export_torch_leaf)
  add_test(NAME export_fx_torch_leaf_modules
    COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py tests.python.small_model:SmallNet
            --input-shape 2,3,8,8 --level torch --leaf-modules torch.nn.Linear,torch.nn.Conv2d --seed 0 --out ${dir}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(export_fx_torch_leaf_modules PROPERTIES FIXTURES_SETUP exported_torch_leaf LABELS torch TIMEOUT 300)
  add_test(NAME read_exported_modules COMMAND test_exported_modules)
  set_tests_properties(read_exported_modules PROPERTIES FIXTURES_REQUIRED exported_torch_leaf LABELS torch
    ENVIRONMENT "KILN_EXPORT_DIR=${dir}")
  # A search/replace pair written in Python (tests/python/replacement_pair.py),
  # exported at the aten level like the model it rewrites, and run by kiln-opt
  # --replacements: both mm + bias of the model become addmm.
  set(_pair_dir ${CMAKE_CURRENT_BINARY_DIR}/replacement_pair)
  foreach(_part Search Replace TwoLayers)
    set(_shapes --input-shape 4,8 --input-shape 8,8 --input-shape 8)
    if(_part STREQUAL "TwoLayers")
      set(_shapes --input-shape 4,8)
    endif()
    add_test(NAME export_replacement_pair_${_part}
      COMMAND ${KILN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tools/export_fx.py tests.python.replacement_pair:${_part}
              ${_shapes} --level aten --seed 0 --out ${_pair_dir}/${_part}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(export_replacement_pair_${_part} PROPERTIES FIXTURES_SETUP replacement_pair LABELS torch TIMEOUT 300)
  endforeach()
  file(WRITE ${_pair_dir}/manifest.json
    "{\"format\": \"kiln-replacements\", \"version\": 1, \"replacements\": [\n"
    "  {\"name\": \"mm_add_to_addmm\", \"search\": \"Search/graph.json\", \"replace\": \"Replace/graph.json\"}]}\n")
  if(TARGET kiln-opt)
    add_test(NAME replacement_pair_from_python
      COMMAND kiln-opt ${_pair_dir}/TwoLayers/graph.json --replacements ${_pair_dir}/manifest.json --counters --print)
    set_tests_properties(replacement_pair_from_python PROPERTIES FIXTURES_REQUIRED replacement_pair LABELS torch
      PASS_REGULAR_EXPRESSION "\"pattern_matcher_count\":2"
      FAIL_REGULAR_EXPRESSION "aten\\.mm\\.default")
  endif()
else()
  message(STATUS "kiln: PyTorch not importable; the export tests are not registered (scripts/install-deps.sh --with-torch)")
endif()

# Compile-fail tests of the pattern DSL: asking a Match for a capture its
# pattern does not bind must not compile (Match::get's static_assert). Each
# target is left out of `all` and built by its test through the build tree;
# the positive twin proves the harness builds what it should.
foreach(_cf unbound_capture bound_capture_ok node_pointer_child vector_child bad_handler bad_extra_check incomplete_element)
  add_executable(compile_fail_${_cf} EXCLUDE_FROM_ALL compile_fail/${_cf}.cpp)
  target_link_libraries(compile_fail_${_cf} PRIVATE kiln::kiln)
endforeach()
# The kernel groups: a key bound twice, in one group or across groups, does not compile.
if(TARGET kiln::runtime)
  foreach(_cf duplicate_kernel_key duplicate_kernel_key_across_groups distinct_kernel_keys_ok)
    add_executable(compile_fail_${_cf} EXCLUDE_FROM_ALL compile_fail/${_cf}.cpp)
    target_link_libraries(compile_fail_${_cf} PRIVATE kiln::runtime)
  endforeach()
endif()
add_test(NAME pattern_unbound_capture_does_not_compile
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DTARGET=compile_fail_unbound_capture
          -DEXPECT=fail "-DEXPECT_TEXT=binds no KeywordArg"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/expect_build.cmake)
add_test(NAME pattern_bound_capture_compiles
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DTARGET=compile_fail_bound_capture_ok
          -DEXPECT=success
          -P ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/expect_build.cmake)
# Misuse reported at the user's line, in one readable message.
set(_cf_texts
  "node_pointer_child|a Node* is not a pattern child"
  "vector_child|not a pattern child: give a pattern"
  "bad_handler|register_pattern: the handler must be callable"
  "bad_extra_check|register_pattern: extra_check must be callable"
  "incomplete_element|must provide the members of a pattern element")
set(_cf_tests pattern_unbound_capture_does_not_compile pattern_bound_capture_compiles)
if(TARGET kiln::runtime)
  foreach(_cf duplicate_kernel_key duplicate_kernel_key_across_groups)
    add_test(NAME kernels_${_cf}_does_not_compile
      COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DTARGET=compile_fail_${_cf}
              -DEXPECT=fail "-DEXPECT_TEXT=an op key is bound to more than one kernel"
              -P ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/expect_build.cmake)
    list(APPEND _cf_tests kernels_${_cf}_does_not_compile)
  endforeach()
  add_test(NAME kernels_distinct_kernel_keys_ok_compiles
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DTARGET=compile_fail_distinct_kernel_keys_ok
            -DEXPECT=success
            -P ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/expect_build.cmake)
  list(APPEND _cf_tests kernels_distinct_kernel_keys_ok_compiles)
endif()
foreach(_entry ${_cf_texts})
  string(REPLACE "|" ";" _parts "${_entry}")
  list(GET _parts 0 _cf)
  list(GET _parts 1 _text)
  add_test(NAME pattern_${_cf}_does_not_compile
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DTARGET=compile_fail_${_cf}
            -DEXPECT=fail "-DEXPECT_TEXT=${_text}"
            -P ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/expect_build.cmake)
  list(APPEND _cf_tests pattern_${_cf}_does_not_compile)
endforeach()
# All drive the same build tree: never at the same time.
set_tests_properties(${_cf_tests} PROPERTIES RESOURCE_LOCK kiln_build_tree LABELS compile_fail TIMEOUT 300)

# A user's -Wall build of the kernels on an AVX-512 machine stays quiet: GCC 12's
# false maybe-uninitialized inside avx512fintrin.h is kept out where kiln
# includes xtensor (kernels/detail/xtensor.hpp). Compiled for AVX-512 whatever
# this machine has; nothing runs.
if(KILN_HAVE_RUNTIME AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_test(NAME xtensor_headers_quiet_under_avx512
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -O3 -DXTENSOR_USE_XSIMD -march=skylake-avx512 -Wall -Wextra -Werror
            -I${PROJECT_SOURCE_DIR}/include -c ${CMAKE_CURRENT_SOURCE_DIR}/warnings/xtensor_quiet.cpp -o xtensor_quiet.o
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(xtensor_headers_quiet_under_avx512 PROPERTIES TIMEOUT 300)
endif()

# The threading contract under ThreadSanitizer: readers of one graph on several
# threads (tests/tsan), built with clang, which scripts/install-deps.sh installs.
find_program(KILN_CLANGXX NAMES clang++ clang++-14)
if(KILN_CLANGXX)
  # and one compiled model run by 4 threads at once (when the executor's
  # libraries are here).
  set(_tsan_programs const_readers)
  if(KILN_HAVE_RUNTIME)
    list(APPEND _tsan_programs compiled_graph_threads)
  endif()
  foreach(_program ${_tsan_programs})
    add_test(NAME tsan_${_program}
      COMMAND ${CMAKE_COMMAND}
        -DCLANGXX=${KILN_CLANGXX}
        -DKILN_SOURCE_DIR=${PROJECT_SOURCE_DIR}
        -DKILN_FIXTURES_DIR=${KILN_FIXTURES_DIR}
        -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/tsan_${_program}
        -DTARGET=test_${_program}
        -P ${CMAKE_CURRENT_SOURCE_DIR}/tsan/run_tsan.cmake)
    set_tests_properties(tsan_${_program} PROPERTIES TIMEOUT 1200 LABELS "slow;tsan")
  endforeach()
  # clang prints a FixedString template argument as character codes; the
  # unbound-capture error must still show the name the user wrote.
  add_test(NAME pattern_unbound_capture_named_by_clang
    COMMAND ${CMAKE_COMMAND} -DCOMPILER=${KILN_CLANGXX}
            -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/unbound_capture.cpp
            -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include -DEXPECT=fail
            "-DEXPECT_TEXT=capture_name<'n', 'o', 'p', 'e'>"
            -P ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/expect_build.cmake)
  set_tests_properties(pattern_unbound_capture_named_by_clang PROPERTIES LABELS compile_fail TIMEOUT 300)
else()
  message(STATUS "kiln: clang++ not found; the ThreadSanitizer test is not registered (scripts/install-deps.sh installs clang)")
endif()

# Fuzzing the readers (tests/fuzz, libFuzzer): KILN_FUZZ_SECONDS each, from seed
# corpora of the fixtures and the bundled example's weights; and the compiler
# and executor, from small graphs (tests/fuzz/seeds) mutated as JSON text. They
# run one after another (they share one build), so their time is CI's tail: a
# longer campaign is -DKILN_FUZZ_SECONDS=600. fuzz_compile_run also builds the
# kernels with the sanitizers, which takes most of its time.
set(KILN_FUZZ_SECONDS 30 CACHE STRING "Seconds each reader is fuzzed for by the fuzz_* tests")
if(KILN_CLANGXX)
  file(GLOB _fuzz_gz_seeds ${KILN_FIXTURES_DIR}/inductor/*.json.gz)
  file(GLOB _fuzz_json_seeds ${PROJECT_SOURCE_DIR}/examples/small_cnn/*.json ${PROJECT_SOURCE_DIR}/tests/data/*.json)
  file(GLOB _fuzz_npy_seeds ${PROJECT_SOURCE_DIR}/examples/small_cnn/weights/*.npy ${PROJECT_SOURCE_DIR}/examples/small_cnn/inputs/*.npy)
  file(GLOB _fuzz_graph_seeds ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/seeds/*.json)
  set(_fuzz_seeds_fx_json ${_fuzz_gz_seeds} ${_fuzz_json_seeds})
  set(_fuzz_seeds_gzip ${_fuzz_gz_seeds})
  set(_fuzz_seeds_npy ${_fuzz_npy_seeds})
  set(_fuzz_seeds_compile_run ${_fuzz_graph_seeds})
  set(_fuzz_timeout_compile_run 1800)
  set(_fuzz_targets fx_json gzip npy)
  if(KILN_HAVE_RUNTIME)  # the executor's dependencies were found
    list(APPEND _fuzz_targets compile_run)
  endif()
  foreach(_fz ${_fuzz_targets})
    add_test(NAME fuzz_${_fz}
      COMMAND ${CMAKE_COMMAND}
        -DCLANGXX=${KILN_CLANGXX} -DKILN_SOURCE_DIR=${PROJECT_SOURCE_DIR}
        -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/fuzz_work -DFUZZ_TARGET=${_fz} -DSECONDS=${KILN_FUZZ_SECONDS}
        "-DSEEDS=${_fuzz_seeds_${_fz}}"
        -P ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.cmake)
    if(NOT DEFINED _fuzz_timeout_${_fz})
      set(_fuzz_timeout_${_fz} 900)
    endif()
    set_tests_properties(fuzz_${_fz} PROPERTIES TIMEOUT ${_fuzz_timeout_${_fz}} LABELS "slow;fuzz"
      RESOURCE_LOCK kiln_fuzz_build)
  endforeach()
endif()
