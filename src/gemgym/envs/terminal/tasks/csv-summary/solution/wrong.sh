cd /app
{ echo "region,total"; awk -F, '{s[$1]+=$3} END {for (k in s) print k "," s[k]}' sales.csv | sort -t, -k2 -n; } > summary.csv
