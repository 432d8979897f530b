# Area "toon": the TOON encoder (src/codec/toon.c), its Lua module cltoon, the fixture CLI,
# unit tests, busted spec, official encode fixtures and the reference round trip.
# The tests compile their sources directly (not clcore) so that half-written modules
# elsewhere in src/ cannot break them.
set(CL_TOON_SOURCES ${CMAKE_SOURCE_DIR}/src/codec/toon.c ${CMAKE_SOURCE_DIR}/src/base/json.c
                    ${CMAKE_SOURCE_DIR}/src/base/util.c)
set(CL_TOON_EXT ${CMAKE_SOURCE_DIR}/build/ext)

add_executable(test_toon ${CMAKE_SOURCE_DIR}/tests/unit/test_toon.c ${CL_TOON_SOURCES})
target_include_directories(test_toon PRIVATE
                                             ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_toon PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_toon COMMAND test_toon)
set_tests_properties(unit_toon PROPERTIES TIMEOUT 60 LABELS "unit;toon")

# JSON on stdin, options in TOON_OPTIONS, TOON on stdout (the fixture runner's ENCODER_CMD).
add_executable(toon-encode ${CMAKE_SOURCE_DIR}/tests/toon/toon-encode.c ${CL_TOON_SOURCES})
target_include_directories(toon-encode PRIVATE )
target_link_libraries(toon-encode PRIVATE PkgConfig::CRYPTO m)

# Benchmark driver (tests/bench/toon-bench.sh; not part of ctest).
add_executable(toon-bench ${CMAKE_SOURCE_DIR}/tests/bench/toon-bench.c ${CL_TOON_SOURCES})
target_include_directories(toon-bench PRIVATE )
target_link_libraries(toon-bench PRIVATE PkgConfig::CRYPTO m)

# The Lua module as cltoon.so for busted (the server links luaopen_cltoon from clcore).
add_library(cltoon MODULE ${CMAKE_SOURCE_DIR}/src/codec/toon_lua.c ${CL_JSON_LUA_SOURCES}
                          ${CL_TOON_SOURCES} ${CMAKE_SOURCE_DIR}/src/codec/toonview.c
                          ${CMAKE_SOURCE_DIR}/src/codec/tokproxy.c)
target_include_directories(cltoon PRIVATE )
target_link_libraries(cltoon PRIVATE PkgConfig::LUA PkgConfig::CRYPTO m)
set_target_properties(cltoon PROPERTIES PREFIX "" OUTPUT_NAME cltoon)

add_test(NAME toon_spec
         COMMAND lua5.4 /usr/bin/busted --output=plainTerminal tests/spec/toon_spec.lua
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set(CL_TOON_SPEC_ENV "CLTOON_CPATH=$<TARGET_FILE_DIR:cltoon>/?.so")
list(APPEND CL_TOON_SPEC_ENV ${CL_LUA_SANITIZER_ENV})
set_tests_properties(toon_spec PROPERTIES ENVIRONMENT "${CL_TOON_SPEC_ENV}" TIMEOUT 60
                     LABELS "lua;toon")

# The 153 official encode fixtures (@toon-format/spec 3.3) and the reference-decoder
# round trip; both need build/ext (scripts/test installs it) and skip (77) without it.
set(CL_TOON_REQUIRE sh ${CMAKE_SOURCE_DIR}/tests/toon/require-toon-ext.sh ${CL_TOON_EXT})
add_test(NAME toon_fixtures
         COMMAND ${CMAKE_COMMAND} -E env ENCODER_CMD=$<TARGET_FILE:toon-encode>
                 ${CL_TOON_REQUIRE} node ${CL_TOON_EXT}/run-encode-fixtures.mjs
                 ${CL_TOON_EXT}/node_modules/@toon-format/spec/tests/fixtures/encode)
add_test(NAME toon_roundtrip
         COMMAND ${CMAKE_COMMAND} -E env ENCODER_CMD=$<TARGET_FILE:toon-encode>
                 ${CL_TOON_REQUIRE} node ${CMAKE_SOURCE_DIR}/tests/toon/roundtrip.mjs
                 ${CL_TOON_EXT})
# (2 s each on an idle machine, 45 s at load 15: the cap leaves room for more)
set_tests_properties(toon_fixtures toon_roundtrip PROPERTIES TIMEOUT 600 LABELS "toon"
                     SKIP_RETURN_CODE 77)
