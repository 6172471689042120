#ifndef OPS_H
#define OPS_H
int apply(char op, long a, long b, long *out);
#endif
