// RUN: nkic-opt %S/Inputs/add-kernel.mlir -p nkic-frontend-lowering | filecheck %s --check-prefix=FRONT
// RUN: nkic-opt %S/Inputs/add-kernel.mlir -p nkic-frontend-lowering | nkic-opt -p nkic-backend | filecheck %s --check-prefix=BACK
// RUN: nkic-opt %S/Inputs/add-kernel.mlir --generation gen2 -p 'nkic-pipeline{kernel_format=klir}' | filecheck %s --check-prefix=BACK
// RUN: xdsl-opt %S/Inputs/add-kernel.mlir -p nkic-pipeline | filecheck %s --check-prefix=BACK

// The named pipelines are passes too; plain xdsl-opt sees them through the xdsl.universe entry point.
// FRONT: bir.function @main attributes {inputs = ["a"], outputs = ["out"]} {
// FRONT-NEXT: bir.memloc @a : shared_hbm [128, 64] float32 {kind = "input"}
// FRONT-NEXT: bir.memloc @out : shared_hbm [128, 64] float32 {kind = "output"}
// FRONT-NEXT: bir.memloc @k.x : sbuf [128, 64] float32
// FRONT-NEXT: bir.dma_copy
// FRONT-NOT: bir.nki_

// BACK: isa.core @sg00 {
// BACK: isa.stream "{{dve|pool|act}}" {
// BACK-NEXT: isa_{{dve|pool|act}}.tensor_tensor dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]], in0 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]], in1 sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]] {id = 1 : i64, op = "add", wait_sem = 8 : i64, wait_value = 1 : i64
// BACK: isa.stream "sp" {
// BACK-NEXT: isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 64]], src hbm(var 0, 0x0, float32)[0 : [64, 128], [1, 64]] {id = 0 : i64, queue = 0 : i64, signal_sem = 8 : i64}
// BACK-NEXT: isa_sp.dma_copy dst hbm(var 1, 0x0, float32)
