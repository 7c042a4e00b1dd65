// SPDX-License-Identifier: Apache-2.0
//
// datamask-select: the command-line program of datamask, with the built-in objectives (the
// program itself is the library dmfront::select_main, tools/datamask-select/program.cpp).

#include <datamask/frontend/program.hpp>

int main(int argc, char** argv) { return dmfront::select_main(argc, argv); }
