# The layers of npu_run (docs/ARCHITECTURE.md), each a static library npu_run_<layer> in a folder
# of its own that declares the layers it uses. The build enforces the layering, not a document:
# the library links only those layers, and configuring fails, naming the file and the include,
# when a source of the layer includes a header of any other layer.
#
#   npu_run_layer(agent USES basics net rendezvous ... LIBS spdlog::spdlog SOURCES a.cpp b.cpp)
#
# Headers are included by layer folder: "basics/text.hpp", "rendezvous/state.hpp".
set(NPU_RUN_LAYER_NAMES basics net rendezvous store cluster devices ascend config workers agent cli
                        doctor commands)

function(npu_run_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 LAYER "" "" "USES;LIBS;SOURCES")
  set(target npu_run_${name})
  add_library(${target} STATIC ${LAYER_SOURCES})
  set(uses)
  foreach(used IN LISTS LAYER_USES)
    list(APPEND uses npu_run_${used})
  endforeach()
  target_link_libraries(${target} PUBLIC ${uses} ${LAYER_LIBS} PRIVATE npu_run_warnings)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/launcher ${PROJECT_SOURCE_DIR}
                                              ${PROJECT_BINARY_DIR}/generated)
  npu_run_check_layer_includes(${name} "${LAYER_USES}")
endfunction()

function(npu_run_check_layer_includes name uses)
  set(allowed ${name} ${uses})
  file(GLOB files ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*.hpp)
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^#include \"[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" layer "${line}")
      if(layer IN_LIST NPU_RUN_LAYER_NAMES AND NOT layer IN_LIST allowed)
        file(RELATIVE_PATH where ${PROJECT_SOURCE_DIR} ${file})
        message(FATAL_ERROR "${where}: '${line}' reaches into the ${layer} layer, but the ${name} "
                            "layer uses only: ${uses}. Move the code to the right layer, or "
                            "declare the use in ${name}'s CMakeLists.txt if the layering allows it.")
      endif()
    endforeach()
  endforeach()
endfunction()
