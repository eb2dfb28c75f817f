# Included by llama.cpp's own project() call when scripts/llama-server.sh
# builds llama-cpp-python (CMAKE_PROJECT_llama.cpp_INCLUDE): turns off
# llama.cpp's "common" library (argument parsing, chat templates, JSON
# schemas for its command-line tools), which llama-cpp-python's CMakeLists
# forces on but its Python bindings never load (they load libllama and
# libggml). An option on the command line cannot do this: that CMakeLists
# sets it with FORCE after reading the command line, before llama.cpp's
# project() runs this file.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp common library: unused by the Python package" FORCE)
