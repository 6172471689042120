cd /app
{ echo "region,total"; tail -n +2 sales.csv | awk -F, '{s[$1]+=$3} END {for (k in s) print k "," s[k]}' | sort; } > summary.csv
