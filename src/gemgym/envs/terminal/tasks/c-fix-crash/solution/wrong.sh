cd /app/wc
sed -i 's/long words = 0;/long words = 0; if (len == 0) { printf("0\\n"); return 0; }/' wordcount.c
make -B
