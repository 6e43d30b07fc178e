/* Two functions with calls, compiled to an object whose relocations are SHT_CREL. */
int crel_leaf(int x) { return x * 3 + 1; }
int crel_loop(int n) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += (i & 1) ? crel_leaf(i) : i;
  return s;
}
