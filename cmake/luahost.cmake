# Area "luahost": the sandboxed Lua state (lvm), tool generations (tools) and calls
# (call). The test compiles its sources directly (not clcore) so that half-written
# modules elsewhere in src/ cannot break it.
set(CL_LUAHOST_TEST_SOURCES
    ${CMAKE_SOURCE_DIR}/src/host/lvm.c ${CMAKE_SOURCE_DIR}/src/host/lvm_alloc.c ${CMAKE_SOURCE_DIR}/src/host/lvm_budget.c ${CMAKE_SOURCE_DIR}/src/host/lvm_sandbox.c ${CMAKE_SOURCE_DIR}/src/host/lvm_gen.c ${CMAKE_SOURCE_DIR}/src/host/lpattern.c ${CMAKE_SOURCE_DIR}/src/host/lbounded.c ${CMAKE_SOURCE_DIR}/src/host/tools.c
    ${CMAKE_SOURCE_DIR}/src/host/reload.c
    ${CMAKE_SOURCE_DIR}/src/upstream/upstream_req.c
    ${CMAKE_SOURCE_DIR}/src/host/call.c ${CMAKE_SOURCE_DIR}/src/host/identity.c ${CMAKE_SOURCE_DIR}/src/upstream/uphealth.c ${CMAKE_SOURCE_DIR}/src/base/metrics.c
    ${CMAKE_SOURCE_DIR}/src/codec/toon.c ${CMAKE_SOURCE_DIR}/src/codec/toon_lua.c
    ${CMAKE_SOURCE_DIR}/src/codec/toonview.c ${CMAKE_SOURCE_DIR}/src/codec/tokproxy.c
    ${CMAKE_SOURCE_DIR}/src/base/json.c ${CL_JSON_LUA_SOURCES}
    ${CMAKE_SOURCE_DIR}/src/upstream/fetch.c ${CMAKE_SOURCE_DIR}/src/upstream/hclient.c ${CMAKE_SOURCE_DIR}/src/base/conf.c ${CMAKE_SOURCE_DIR}/src/base/log.c
    ${CMAKE_SOURCE_DIR}/src/base/util.c ${CMAKE_SOURCE_DIR}/src/base/texts.c
    ${CMAKE_SOURCE_DIR}/src/host/texts_lua.c ${CMAKE_SOURCE_DIR}/src/codec/errenv.c)

add_executable(test_tools ${CMAKE_SOURCE_DIR}/tests/unit/test_tools.c ${CL_LUAHOST_TEST_SOURCES})
target_include_directories(test_tools PRIVATE
                                              ${CMAKE_SOURCE_DIR}/tests/unit)
target_compile_definitions(test_tools PRIVATE CL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# tools.h line 3 says "tools/*.lua" inside a comment (-Wcomment).
target_compile_options(test_tools PRIVATE -Wno-comment)
target_link_libraries(test_tools PRIVATE PkgConfig::LUA PkgConfig::LIBEVENT PkgConfig::CURL
                                         PkgConfig::CRYPTO m)
add_test(NAME unit_tools COMMAND test_tools)
set_tests_properties(unit_tools PROPERTIES TIMEOUT 300 LABELS "unit;luahost" # 2.4 s idle (ASan), 29 s at load 22
                     WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# lpattern against the stock string library (differential, fixed seed) and its
# budget charging; links lpattern.c alone with a stand-in lvm_charge.
add_executable(test_lpattern ${CMAKE_SOURCE_DIR}/tests/unit/test_lpattern.c
                             ${CMAKE_SOURCE_DIR}/src/host/lpattern.c)
target_include_directories(test_lpattern PRIVATE
                                                 ${CMAKE_SOURCE_DIR}/tests/unit)
target_compile_definitions(test_lpattern PRIVATE CL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(test_lpattern PRIVATE PkgConfig::LUA m)
add_test(NAME unit_lpattern COMMAND test_lpattern)
set_tests_properties(unit_lpattern PROPERTIES TIMEOUT 300 LABELS "unit;luahost")

# The identity policy of a tool's upstream request (src/host/identity.c, pure).
add_executable(test_identity ${CMAKE_SOURCE_DIR}/tests/unit/test_identity.c
                             ${CMAKE_SOURCE_DIR}/src/host/identity.c)
target_include_directories(test_identity PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit ${CMAKE_SOURCE_DIR}/src/host
                                                 ${CMAKE_SOURCE_DIR}/src/base)
add_test(NAME unit_identity COMMAND test_identity)
set_tests_properties(unit_identity PROPERTIES TIMEOUT 30 LABELS "unit")
