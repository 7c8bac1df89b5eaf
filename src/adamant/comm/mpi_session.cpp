#include "adamant/comm/mpi_session.h"

#include <exception>

#include "adamant/comm/launcher_environment.h"
#include "adamant/comm/mpi_check.h"
#include "adamant/core/error.h"

namespace adamant::comm {

namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown thread level";
  }
}

}  // namespace

NodeLocalRank query_node_local_rank(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  NodeLocalRank result;
  const int rank_code = MPI_Comm_rank(node, &result.rank);
  const int size_code = MPI_Comm_size(node, &result.size);
  MPI_Comm_free(&node);
  check_mpi(rank_code, "MPI_Comm_rank");
  check_mpi(size_code, "MPI_Comm_size");
  return result;
}

MpiSession::MpiSession(int required_thread_level) : MpiSession(nullptr, nullptr, required_thread_level) {}

MpiSession::MpiSession(int* argc, char*** argv, int required_thread_level) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  ADAMANT_CHECK(finalized == 0, "MpiSession: MPI was already finalised in this process and cannot start again");
  if (initialized != 0) {
    check_mpi(MPI_Query_thread(&thread_level_), "MPI_Query_thread");
  } else {
    check_mpi(MPI_Init_thread(argc, argv, required_thread_level, &thread_level_), "MPI_Init_thread");
    owns_mpi_ = true;
  }
  try {
    ADAMANT_CHECK(thread_level_ >= required_thread_level,
                  "MpiSession: MPI provides {} but {} is required; use an MPI library built with thread support",
                  thread_level_name(thread_level_), thread_level_name(required_thread_level));
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size");
    check_launcher_world_size(process_environment(), world_size_);
    // Where the launcher exports the node-local rank every rank has it; under other
    // launchers no rank has it, so all of them take the collective query together.
    if (const auto launcher = local_rank_from_launcher(process_environment())) {
      local_rank_ = launcher->rank;
      local_size_ = launcher->size;
    } else {
      const NodeLocalRank node = query_node_local_rank(MPI_COMM_WORLD);
      local_rank_ = node.rank;
      local_size_ = node.size;
    }
  } catch (...) {
    if (owns_mpi_) MPI_Finalize();
    throw;
  }
}

MpiSession::~MpiSession() {
  // Ended by an exception, this rank may be the only one to fail while the others wait in a
  // collective for it; MPI_Finalize would wait for them in turn, so the error would never
  // show. Exiting without it makes the launcher end the job once the error is out.
  if (std::uncaught_exceptions() > uncaught_exceptions_) return;
  if (owns_mpi_ && mpi_is_active()) MPI_Finalize();
}

}  // namespace adamant::comm
