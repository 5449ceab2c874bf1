# Unity batches that a second clone finds in ccache.
#
# CMake's own unity build (CMAKE_UNITY_BUILD) writes batches that include their sources by
# absolute path: "#include "/work/main/launcher/agent/a.cpp"". CI builds in a fresh clone, so
# every batch's text differs from the one a session compiled, and ccache missed on every batch
# of every tree (CCACHE_BASEDIR rewrites the command line's paths, never a file's contents).
# These batches include their sources by their path in the checkout ("launcher/agent/a.cpp",
# found through -I<checkout>, which ccache rewrites to a relative path): the same text, the same
# command line and the same included paths in every clone, so a second clone hits.
#
# npu_run_unity_batches(SIZE) is deferred to the end of the configure: every target of the
# project that compiles two or more of the checkout's .cpp files then compiles them in batches
# of SIZE (0: one batch), in the order it lists them. Generated sources and one-file targets
# compile alone. A batch is rewritten only when its list changes (file(CONFIGURE)), so that a
# reconfigure recompiles nothing. scripts/tidy.py reads the batches back (the marker line).

function(npu_run_collect_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    npu_run_collect_targets("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The target's sources that belong in batches: the checkout's own .cpp files, as paths relative
# to the checkout (batchable), and every other source as it was listed (kept).
function(npu_run_split_sources target batchable kept)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(in)
  set(out)
  foreach(source IN LISTS sources)
    if(source MATCHES "^\\$<" OR NOT source MATCHES "\\.cpp$")
      list(APPEND out "${source}")
      continue()
    endif()
    set(path "${source}")
    if(NOT IS_ABSOLUTE "${source}")
      set(path "${source_dir}/${source}")
    endif()
    get_source_file_property(generated "${path}" TARGET_DIRECTORY ${target} GENERATED)
    file(RELATIVE_PATH relative "${PROJECT_SOURCE_DIR}" "${path}")
    cmake_path(IS_PREFIX PROJECT_BINARY_DIR "${path}" NORMALIZE in_build_tree)
    if(generated OR in_build_tree OR relative MATCHES "^\\.\\./")
      list(APPEND out "${source}")
    else()
      list(APPEND in "${relative}")
    endif()
  endforeach()
  set(${batchable} ${in} PARENT_SCOPE)
  set(${kept} ${out} PARENT_SCOPE)
endfunction()

function(npu_run_batch_target target size)
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
    return()
  endif()
  npu_run_split_sources(${target} batchable kept)
  list(LENGTH batchable count)
  if(count LESS 2)
    return()
  endif()
  if(size LESS_EQUAL 0)
    set(size ${count})
  endif()
  get_target_property(binary_dir ${target} BINARY_DIR)
  set(batches)
  set(first 0)
  set(index 0)
  while(first LESS count)
    list(SUBLIST batchable ${first} ${size} members)
    set(text "// npu_run unity batch (cmake/unity_batches.cmake): sources by their checkout path\n")
    foreach(member IN LISTS members)
      string(APPEND text "#include \"${member}\"\n")
    endforeach()
    set(batch "${binary_dir}/unity/${target}/batch_${index}.cpp")
    file(CONFIGURE OUTPUT "${batch}" CONTENT "${text}" @ONLY)
    list(APPEND batches "${batch}")
    math(EXPR first "${first} + ${size}")
    math(EXPR index "${index} + 1")
  endwhile()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept} ${batches})
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}")
endfunction()

function(npu_run_unity_batches size)
  npu_run_collect_targets("${PROJECT_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    npu_run_batch_target(${target} ${size})
  endforeach()
endfunction()
