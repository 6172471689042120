#include "ops.h"

int apply(char op, long a, long b, long *out) {
    switch (op) {
    case '+': *out = a + b; return 0;
    case '-': *out = a - b; return 0;
    case 'x': *out = a * b; return 0;
    case '/': if (b == 0) return 1; *out = a / b; return 0;
    default: return 1;
    }
}
