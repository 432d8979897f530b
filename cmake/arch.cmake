# Area "arch": the shape of the core. The module call graph of clcore (module A
# uses B when A's object file needs a symbol B's defines) must have no cycle: a
# request goes one way, from httpd through the route table to the surfaces, the
# call sequencing and the tools; nothing below calls back up.
add_test(NAME module_graph
         COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check-module-graph
                 ${CMAKE_BINARY_DIR}/CMakeFiles/clcore.dir/src)
set_tests_properties(module_graph PROPERTIES TIMEOUT 60 LABELS "arch")
