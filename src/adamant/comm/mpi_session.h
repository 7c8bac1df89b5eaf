#pragma once
// MPI's lifetime for a program: MPI_Init_thread on construction, MPI_Finalize
// on destruction. When MPI is already initialised (a test main, an embedding
// program) the session only checks the thread level and leaves finalisation
// to whoever initialised it. Destroyed by an exception, it leaves MPI running: the process
// exits with its error and the launcher ends the other ranks.
#include <mpi.h>

#include <exception>

namespace adamant::comm {

class MpiSession {
 public:
  // `required_thread_level`: MPI_THREAD_FUNNELED suffices for Adamant (only the
  // main thread calls MPI); ask for more if other threads will call MPI.
  MpiSession(int* argc, char*** argv, int required_thread_level = MPI_THREAD_FUNNELED);
  explicit MpiSession(int required_thread_level = MPI_THREAD_FUNNELED);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool owns_mpi() const { return owns_mpi_; }  // true when this session called MPI_Init_thread
  int thread_level() const { return thread_level_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Rank among the processes on this node: pick the GPU with it.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

 private:
  bool owns_mpi_ = false;
  int uncaught_exceptions_ = std::uncaught_exceptions();  // at construction
  int thread_level_ = MPI_THREAD_SINGLE;
  int world_rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
};

struct NodeLocalRank {
  int rank = 0;  // among the ranks of `comm` that share this node's memory
  int size = 1;
};

// Asks MPI which ranks of `comm` share this node (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED). Collective over `comm`.
NodeLocalRank query_node_local_rank(MPI_Comm comm);

}  // namespace adamant::comm
