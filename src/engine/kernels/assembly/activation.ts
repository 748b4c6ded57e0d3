// The feed-forward block's activation: SwiGLU, silu(gate) × up, element by element. Each element
// is computed whole by one thread, in f64 as the reference loop does, so threads never change a
// result.

/** out[i] = gate[i] / (1 + e^-gate[i]) × up[i] for i in [start, end); all f32 arrays (`out` may be `gate`). */
export function swiglu(gate: usize, up: usize, out: usize, start: i32, end: i32): void {
  for (let i = start; i < end; i++) {
    const at = <usize>i << 2;
    const g = <f64>load<f32>(gate + at);
    store<f32>(out + at, <f32>((g / (1 + Math.exp(-g))) * <f64>load<f32>(up + at)));
  }
}
