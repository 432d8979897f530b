# Area "arch": the shape of the core. The module call graph of clcore (module A
# uses B when A's object file needs a symbol B's defines) must have no cycle: a
# request goes one way, from httpd through the route table to the surfaces, the
# call sequencing and the tools; nothing below calls back up.
add_test(NAME module_graph
         COMMAND python3 ${CMAKE_SOURCE_DIR}/scripts/check-module-graph
                 --doc ${CMAKE_SOURCE_DIR}/docs/architecture.md
                 ${CMAKE_BINARY_DIR}/CMakeFiles/clcore.dir/src)
set_tests_properties(module_graph PROPERTIES TIMEOUT 300 LABELS "arch") # 1.5 s idle, 20 s seen at load 15

# Every error code the sources can emit is listed in docs/errors.md.
add_test(NAME check_error_codes
         COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check-error-codes ${CMAKE_SOURCE_DIR})
set_tests_properties(check_error_codes PROPERTIES TIMEOUT 60 LABELS "arch")

# The repository stands alone: no citations of the spec, seeds, reference notes or
# issue numbers in code, tests or docs.
add_test(NAME check_standalone
         COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check-standalone ${CMAKE_SOURCE_DIR})
set_tests_properties(check_standalone PROPERTIES TIMEOUT 60 LABELS "arch")

# The call sequencing (flow.c) with link-time fakes of Trace Core, the idempotency
# store and the tool (tests/unit/test_flow.c): probe verdicts, the lease cache,
# receipt reuse, idempotent replay and refusals, cancellation at each stage.
add_executable(test_flow ${CMAKE_SOURCE_DIR}/tests/unit/test_flow.c
                         ${CMAKE_SOURCE_DIR}/src/flow/flow.c ${CMAKE_SOURCE_DIR}/src/flow/outcome.c
                         ${CMAKE_SOURCE_DIR}/src/codec/mcp_msg.c ${CMAKE_SOURCE_DIR}/src/flow/guard.c
                         ${CMAKE_SOURCE_DIR}/src/flow/callcheck.c ${CMAKE_SOURCE_DIR}/src/base/accept.c
                         ${CMAKE_SOURCE_DIR}/src/base/log.c ${CMAKE_SOURCE_DIR}/src/base/json.c
                         ${CMAKE_SOURCE_DIR}/src/base/util.c ${CMAKE_SOURCE_DIR}/src/base/texts.c
                         ${CMAKE_SOURCE_DIR}/src/codec/errenv.c)
target_include_directories(test_flow PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_include_directories(test_flow PRIVATE ${LIBEVENT_INCLUDE_DIRS} ${LUA_INCLUDE_DIRS})
target_link_libraries(test_flow PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_flow COMMAND test_flow)
set_tests_properties(unit_flow PROPERTIES TIMEOUT 60 LABELS "unit;arch")

# The stateless MCP era's edge (src/codec/mcp_era.c): era classification, the
# validation ladder's codes in order, the Mcp-Name forms, the error and result framing.
add_executable(test_mcp_era ${CMAKE_SOURCE_DIR}/tests/unit/test_mcp_era.c
                            ${CMAKE_SOURCE_DIR}/src/codec/mcp_era.c
                            ${CMAKE_SOURCE_DIR}/src/codec/mcp_msg.c ${CMAKE_SOURCE_DIR}/src/base/json.c
                            ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_mcp_era PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_mcp_era PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_mcp_era COMMAND test_mcp_era)
set_tests_properties(unit_mcp_era PROPERTIES TIMEOUT 60 LABELS "unit")

# No function in src/ is longer than 150 lines (scripts/check-function-length).
add_test(NAME function_length
         COMMAND python3 ${CMAKE_SOURCE_DIR}/scripts/check-function-length ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(function_length PROPERTIES TIMEOUT 60 LABELS "arch")
