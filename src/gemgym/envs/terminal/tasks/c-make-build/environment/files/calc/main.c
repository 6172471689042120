#include <stdio.h>
#include <stdlib.h>
#include "ops.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: calc A OP B\n");
        return 2;
    }
    long a = atol(argv[1]), b = atol(argv[3]);
    long r;
    if (apply(argv[2][0], a, b, &r) != 0) {
        fprintf(stderr, "bad operator\n");
        return 2;
    }
    printf("%ld\n", r);
    return 0;
}
