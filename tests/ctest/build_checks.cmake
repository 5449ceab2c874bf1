# The build's own checks, tree-independent: registered in the plain tree only.

# NAME as "build: NAME", passing when its output matches PASS.
function(npu_run_build_check name timeout pass)
  add_test(NAME "build: ${name}" COMMAND ${ARGN})
  set_tests_properties("build: ${name}" PROPERTIES LABELS build TIMEOUT ${timeout}
                                                   PASS_REGULAR_EXPRESSION "${pass}")
endfunction()

set(checks ${CMAKE_CURRENT_SOURCE_DIR}/build)

# The build's own rules: a layer including one it did not declare fails to configure
# (cmake/layers.cmake), for today's layers and for one the test adds.
npu_run_build_check("a layer that includes an undeclared layer fails to configure" 300
                    "layer check: all passed" bash ${checks}/layer_check.sh ${PROJECT_SOURCE_DIR})

# Every file the docs and the code's comments name exists; the architecture page stays short.
npu_run_build_check("every file the docs name exists" 60 " 0 missing"
                    /usr/bin/python3 ${checks}/doc_paths.py ${PROJECT_SOURCE_DIR})

# The architecture page's table of layers says what each layer's CMakeLists.txt declares.
npu_run_build_check("the architecture's layer table matches the build's layers" 60 " 0 differences"
                    /usr/bin/python3 ${checks}/layer_table.py ${PROJECT_SOURCE_DIR})

# Every npu_run option the README and docs/guide name is one of its command's, read from the
# binary's own tables.
npu_run_build_check("every option the guide names exists" 60 " 0 unknown"
                    /usr/bin/python3 ${checks}/doc_options.py ${PROJECT_SOURCE_DIR}
                    $<TARGET_FILE:npu_run>)

# catch_discover_tests splits names on ';': a test name holding one would fail in CI only.
# (The pattern holds no ';' itself: CMake would split it into two patterns, "'" among them,
# which any output matches.)
npu_run_build_check("no test name holds a semicolon" 60 "files read, 0 with"
                    /usr/bin/python3 ${checks}/test_names.py ${PROJECT_SOURCE_DIR})

# CI's time budget: a run or stage over its share is named in capitals, with the tests that grew.
npu_run_build_check("the time budget names what went over" 60 " 0 failures"
                    /usr/bin/python3 ${checks}/time_budget_check.py ${PROJECT_SOURCE_DIR})
