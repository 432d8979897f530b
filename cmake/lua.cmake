# Lua side: busted specs (tool contract, schema subset, tools) and luacheck.
# The specs load the JSON module cljson.so from its build directory, so build the
# cljson target before running ctest.
find_program(CL_LUA54 NAMES lua5.4)
find_program(CL_BUSTED NAMES busted)
find_program(CL_LUACHECK NAMES luacheck)

if(CL_LUA54 AND CL_BUSTED)
  # busted's shebang says plain `lua`; run it with lua5.4 explicitly.
  add_test(NAME lua_busted
           COMMAND ${CL_LUA54} ${CL_BUSTED} --output=plainTerminal
                   "--lpath=${CMAKE_SOURCE_DIR}/lua/?.lua;${CMAKE_SOURCE_DIR}/tools/?.lua;${CMAKE_SOURCE_DIR}/tests/spec/?.lua"
                   "--cpath=$<TARGET_FILE_DIR:cljson>/?.so"
                   ${CMAKE_SOURCE_DIR}/tests/spec
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # 1800 s: under ASan the suite takes about 30 s on an idle machine and took 300 s
  # at load 15-20 (it shares two cores with the integration tests).
  # CLJSON_CPATH too: a spec that sets its own search path must still load this build
  # directory's modules (a stale build/cljson.so next to a sanitized build mixed in).
  set_tests_properties(lua_busted PROPERTIES TIMEOUT 1800 LABELS lua
                       ENVIRONMENT "CLJSON_CPATH=$<TARGET_FILE_DIR:cljson>/?.so;${CL_LUA_SANITIZER_ENV}")
else()
  message(WARNING "lua5.4 or busted not found: the busted specs are not registered")
endif()

if(CL_LUACHECK)
  add_test(NAME lua_luacheck
           COMMAND ${CL_LUACHECK} --config ${CMAKE_SOURCE_DIR}/.luacheckrc --no-color
                   lua tools tests/spec tests/kit
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(lua_luacheck PROPERTIES TIMEOUT 300 LABELS lua)
else()
  message(WARNING "luacheck not found: the Lua lint test is not registered")
endif()
