#pragma once
// How adamant dtypes and reduce ops map onto MPI. MPI has no 16-bit float
// types, so bf16 and fp16 travel as MPI_UINT16_T with user-defined ops that add
// (or compare) in fp32 and round to nearest even.
#include <mpi.h>

#include <cstddef>

#include "adamant/comm/communicator.h"
#include "adamant/core/dtype.h"

namespace adamant::comm {

MPI_Datatype mpi_datatype(DType dtype);

// Owns the user-defined MPI ops (MPI_Op_create in the constructor, MPI_Op_free
// in the destructor). Create after MPI_Init; each communicator holds one set.
class MpiReduceOps {
 public:
  MpiReduceOps();

  // The MPI op that performs the reduction step of `op` on `dtype`. avg maps to
  // the sum op: the division by the group size happens after the collective.
  MPI_Op op_for(DType dtype, ReduceOp op) const;

 private:
  // One commutative user-defined op; MPI_Op_free on destruction.
  class OwnedOp {
   public:
    explicit OwnedOp(MPI_User_function* function);
    ~OwnedOp();
    OwnedOp(const OwnedOp&) = delete;
    OwnedOp& operator=(const OwnedOp&) = delete;
    MPI_Op get() const { return op_; }

   private:
    MPI_Op op_ = MPI_OP_NULL;
  };

  OwnedOp bf16_sum_;
  OwnedOp bf16_max_;
  OwnedOp f16_sum_;
  OwnedOp f16_max_;
};

// Divides each element of host memory `data` (count elements of `dtype`) by
// `divisor`, as avg does after the sum: in the element type for fp32/fp64, in
// fp32 with round to nearest even for bf16/fp16.
void divide_in_place(void* data, DType dtype, std::size_t count, int divisor);

}  // namespace adamant::comm
