-- uses: lock_or_mark
if lock_or_mark(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]) then return 1 end
return 0
