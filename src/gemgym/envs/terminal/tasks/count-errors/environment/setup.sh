mkdir -p logs
for f in a b c; do
  for i in $(seq 1 40); do
    if [ $((i % 7)) -eq 0 ]; then echo "2024-01-0$((i % 9 + 1)) ERROR disk $f$i failed";
    elif [ $((i % 5)) -eq 0 ]; then echo "2024-01-01 WARN error rate high on $f";
    else echo "2024-01-01 INFO ok $f$i"; fi
  done > logs/$f.log
done
echo "ERROR in a file that is not a log" > logs/notes.txt
