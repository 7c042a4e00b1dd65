// SPDX-License-Identifier: Apache-2.0
// datamask-select with an objective of one's own: `own_program --demo --objective centred-mean
// --objective pairwise` runs it with every option, output, checkpoint, shard and MPI behaviour of
// datamask-select. Its relaxation (centred_mean::relax) lets auto run the continuous learner.
#include <datamask/frontend/program.hpp>

#include "centred_mean.hpp"

int main(int argc, char** argv) {
  dmfront::objective_registry objectives;  // pairwise, facility, disf
  objectives.add("centred-mean", centred_mean{}, "minus the squared norm of the selection's mean embedding");
  return dmfront::select_main(argc, argv, objectives);
}
