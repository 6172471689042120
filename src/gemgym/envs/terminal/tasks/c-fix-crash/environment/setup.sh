make -C wc >/dev/null
