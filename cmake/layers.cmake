# The layers of npu_run (docs/ARCHITECTURE.md), each a static library npu_run_<layer> in a folder
# of its own that declares the layers it uses. The build enforces the layering, not a document:
#  - a layer may use only layers declared before it (the top-level CMakeLists.txt adds them
#    bottom-up), so no arrow points up and a misspelt name is caught;
#  - the library links only those layers;
#  - once every layer is declared, configuring fails, naming the file and the include, when a
#    source of a layer includes a header of any other layer it did not declare.
# The list of layers is made by the npu_run_layer() calls themselves: a new layer is checked, and
# checked against, the day it appears (tests/build/layer_check.sh proves both).
#
#   npu_run_layer(agent USES basics net rendezvous ... LIBS spdlog::spdlog SOURCES a.cpp b.cpp)
#
# Headers are included by layer folder: "basics/text.hpp", "rendezvous/state/state.hpp". A layer
# in a folder of a folder is named by both ("rendezvous/state"; its library npu_run_rendezvous_state).

function(npu_run_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 LAYER "" "" "USES;LIBS;SOURCES")
  get_property(declared GLOBAL PROPERTY NPU_RUN_LAYERS)
  if(name IN_LIST declared)
    message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE}: the layer '${name}' is declared twice")
  endif()
  set(uses)
  foreach(used IN LISTS LAYER_USES)
    if(NOT used IN_LIST declared)
      message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE}: the ${name} layer uses '${used}', which is "
                          "not a layer declared before it (declared so far: ${declared}). Layers "
                          "use only the ones below them; add_subdirectory() them bottom-up.")
    endif()
    string(REPLACE "/" "_" used_target "${used}")
    list(APPEND uses npu_run_${used_target})
  endforeach()
  string(REPLACE "/" "_" target "npu_run_${name}")
  add_library(${target} STATIC ${LAYER_SOURCES})
  target_link_libraries(${target} PUBLIC ${uses} ${LAYER_LIBS} PRIVATE npu_run_warnings)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/launcher ${PROJECT_SOURCE_DIR}
                                              ${PROJECT_BINARY_DIR}/generated)
  set_property(GLOBAL APPEND PROPERTY NPU_RUN_LAYERS ${name})
  set_property(GLOBAL PROPERTY NPU_RUN_LAYER_USES_${target} "${LAYER_USES}")
  set_property(GLOBAL PROPERTY NPU_RUN_LAYER_DIR_${target} "${CMAKE_CURRENT_SOURCE_DIR}")
  # Once, after the whole project is read: only then is every layer's name known.
  get_property(scheduled GLOBAL PROPERTY NPU_RUN_LAYER_CHECK_SCHEDULED)
  if(NOT scheduled)
    set_property(GLOBAL PROPERTY NPU_RUN_LAYER_CHECK_SCHEDULED TRUE)
    cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL npu_run_check_layer_includes)
  endif()
endfunction()

# Every source and header of every layer includes only its own layer's headers and those of the
# layers it uses.
function(npu_run_check_layer_includes)
  get_property(layers GLOBAL PROPERTY NPU_RUN_LAYERS)
  foreach(name IN LISTS layers)
    string(REPLACE "/" "_" target "npu_run_${name}")
    get_property(uses GLOBAL PROPERTY NPU_RUN_LAYER_USES_${target})
    get_property(dir GLOBAL PROPERTY NPU_RUN_LAYER_DIR_${target})
    set(allowed ${name} ${uses})
    file(GLOB files ${dir}/*.cpp ${dir}/*.hpp)
    foreach(file IN LISTS files)
      file(STRINGS ${file} includes REGEX "^#include \"[a-z_]+/")
      foreach(line IN LISTS includes)
        # A layer in a folder of a folder ("rendezvous/state") is named by both.
        string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" layer "${line}")
        if(line MATCHES "^#include \"([a-z_]+/[a-z_]+)/" AND CMAKE_MATCH_1 IN_LIST layers)
          set(layer ${CMAKE_MATCH_1})
        endif()
        if(layer IN_LIST layers AND NOT layer IN_LIST allowed)
          file(RELATIVE_PATH where ${PROJECT_SOURCE_DIR} ${file})
          message(FATAL_ERROR "${where}: '${line}' reaches into the ${layer} layer, but the "
                              "${name} layer uses only: ${uses}. Move the code to the right "
                              "layer, or declare the use in ${name}'s CMakeLists.txt if the "
                              "layering allows it.")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
