# llama.cpp as a static CMake subproject, pinned to the source in
# node-llama-cpp@3.22.1 (scripts/fetch-llama.sh verifies and unpacks it).
# libllama + ggml + llama-common (its chat layer: Jinja templates, tool-call
# formats and parsers, JSON schema -> grammar; used by src/engine/chat_format.cc)
# are built; llama-server only when AGENTKV_LLAMA_SERVER asks for it.

if(NOT EXISTS ${AGENTKV_LLAMA_DIR}/CMakeLists.txt)
  message(FATAL_ERROR "llama.cpp source not found at ${AGENTKV_LLAMA_DIR}; run scripts/fetch-llama.sh")
endif()

set(BUILD_SHARED_LIBS OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TESTS OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_EXAMPLES OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_APP OFF CACHE BOOL "" FORCE)
set(LLAMA_CURL OFF CACHE BOOL "" FORCE)
set(LLAMA_OPENSSL OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TOOLS ${AGENTKV_LLAMA_SERVER} CACHE BOOL "" FORCE)
set(LLAMA_BUILD_SERVER ${AGENTKV_LLAMA_SERVER} CACHE BOOL "" FORCE)
set(LLAMA_BUILD_COMMON ON CACHE BOOL "" FORCE)
set(GGML_CUDA ${AGENTKV_CUDA} CACHE BOOL "" FORCE)
set(GGML_NATIVE ${AGENTKV_NATIVE} CACHE BOOL "" FORCE)
if(NOT AGENTKV_NATIVE)
  # A fixed x86-64 feature level instead of -march=native, so ccache'd objects
  # stay valid on any AVX2 machine (CI machines may differ from this one).
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    foreach(f AVX AVX2 FMA F16C BMI2)
      set(GGML_${f} ON CACHE BOOL "" FORCE)
    endforeach()
  endif()
endif()
set(GGML_OPENMP ON CACHE BOOL "" FORCE)

add_subdirectory(${AGENTKV_LLAMA_DIR} ${CMAKE_BINARY_DIR}/llama.cpp EXCLUDE_FROM_ALL)

# agentkv uses common's chat layer only: the command-line parser, model
# download, console, presets, imatrix loading and the rest are never linked
# into it (a linker trace shows none of their objects pulled in), so they are
# not compiled either (~2 min less of a cold 2-core build). llama-server needs
# them all.
if(NOT AGENTKV_LLAMA_SERVER)
  get_target_property(agentkv_common_sources llama-common SOURCES)
  list(FILTER agentkv_common_sources EXCLUDE REGEX
       "(^|/)(arg|console|debug|download|hf-cache|imatrix-loader|llguidance|preset|subproc)\\.cpp$")
  set_property(TARGET llama-common PROPERTY SOURCES ${agentkv_common_sources})
endif()

# Vendored single copies that llama.cpp already ships: nlohmann/json
# (target nlohmann), xxhash + sha256 (target vendor-hash), cpp-httplib (the
# target llama.cpp's vendor/ defines for common; it sets TCP_NODELAY).
find_package(Threads REQUIRED)
target_include_directories(cpp-httplib INTERFACE ${AGENTKV_LLAMA_DIR}/vendor)
target_link_libraries(cpp-httplib INTERFACE Threads::Threads)
if(AGENTKV_LLAMA_SERVER)
  add_custom_target(agentkv-llama-server ALL DEPENDS llama-server)
endif()

# ggml's own operator test (tests/test-backend-ops.cpp of the pinned source, extended by our patches' cases):
# compares every backend's result with the CPU's, and times operators in `perf` mode. Built only when asked
# for (`ninja test-backend-ops`; device-bench's fattn-ops step on the GPU), never by default.
if(EXISTS ${AGENTKV_LLAMA_DIR}/tests/test-backend-ops.cpp)
  add_executable(test-backend-ops EXCLUDE_FROM_ALL ${AGENTKV_LLAMA_DIR}/tests/test-backend-ops.cpp)
  target_link_libraries(test-backend-ops PRIVATE ggml Threads::Threads)
endif()
