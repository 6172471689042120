mkdir -p data/x/y data/z
head -c 2000 /dev/zero > data/big1.bin
head -c 1024 /dev/zero > data/exact.bin
head -c 100 /dev/zero > data/small.txt
head -c 5000 /dev/zero > data/x/y/deep.dat
head -c 1025 /dev/zero > "data/z/just over.log"
head -c 10 /dev/zero > data/z/tiny
ln -s /app/data/big1.bin data/link-to-big
