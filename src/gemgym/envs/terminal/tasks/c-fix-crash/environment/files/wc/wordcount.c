#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

/* Read all of stdin into a buffer that grows as needed. */
static char *read_all(size_t *len) {
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    int c;
    while ((c = getchar()) != EOF) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        buf[n++] = (char)c;
    }
    *len = n;
    return buf;
}

int main(void) {
    size_t len;
    char *text = read_all(&len);
    long words = 0;
    int in_word = 0;
    for (size_t i = 0; i <= len; i++) {
        if (isspace((unsigned char)text[i])) {
            in_word = 0;
        } else if (!in_word) {
            in_word = 1;
            words++;
        }
    }
    printf("%ld\n", words);
    free(text);
    return 0;
}
