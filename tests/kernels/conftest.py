"""Kernel tests run real Triton on a GPU, and the Triton interpreter on CPU: the suite's conftest
sets TRITON_INTERPRET=1 without a GPU, before anything imports triton."""
