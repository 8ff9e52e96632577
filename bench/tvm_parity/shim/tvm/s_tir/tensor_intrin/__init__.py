"""``tvm.s_tir.tensor_intrin``: TVM's intrinsic libraries, by the names they register.

Only the names are here; a test that tensorizes with one the workbench has not
registered gets the workbench's error for an unknown intrinsic.
"""
