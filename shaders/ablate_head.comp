#version 430
// Head ablation in place: one head's output columns [col0, col0 + d) of a (rows, ld)
// matrix replaced, in every row, by 0 (mean_mode = 0) or by the column's mean over the
// rows (mean_mode = 1). One invocation per column. Dispatch: (ceil(d / 64), 1).

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };

uniform int rows;
uniform int d;
uniform int ld;
uniform int col0;
uniform int mean_mode;

void main() {
  int e = int(gl_GlobalInvocationID.x);
  if (e >= d) return;
  int c = col0 + e;
  float v = 0.0;
  if (mean_mode != 0) {
    float s = 0.0;
    for (int r = 0; r < rows; ++r) s += x[r * ld + c];
    v = s / float(rows);
  }
  for (int r = 0; r < rows; ++r) x[r * ld + c] = v;
}
