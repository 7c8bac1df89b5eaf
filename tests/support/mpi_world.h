#pragma once
// Where this process stands in MPI_COMM_WORLD, for tests run under mpirun (asked of MPI
// directly, not through the communicators under test).

namespace adamant::testing {

int world_rank();
int world_size();

}  // namespace adamant::testing
