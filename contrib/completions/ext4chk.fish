complete -c ext4chk -s C -d 'Progress: 0 draws a bar on standard output; a descriptor N > 0 gets e2fsck\'s "PASS CURRENT MAX DEVICE" lines (a negative N starts silent until SIGUSR1)' -r
complete -c ext4chk -s b -l superblock -d 'Use the backup superblock at this block (and write it back to the primary after a repair)' -r
complete -c ext4chk -s B -l blocksize -d 'The block size to read the -b superblock with (else every size is tried)' -r
complete -c ext4chk -s E -d 'Extended options, separated by commas (see the EXTENDED OPTIONS section of the man page); only the last -E counts, as in e2fsck' -r
complete -c ext4chk -s j -l external-journal -d 'The external journal device (for a file system whose journal is not inside it)' -r
complete -c ext4chk -s l -l add-badblocks -d 'Add the blocks listed in FILE (one number per line) to the bad-block list' -r
complete -c ext4chk -s L -l set-badblocks -d 'Replace the bad-block list with the blocks listed in FILE' -r
complete -c ext4chk -s M -d 'e2fsck\'s memory-tracing option (absent from its normal builds): refused' -r
complete -c ext4chk -s I -d 'e2fsck\'s inode-table buffer size, in blocks: accepted (it must be a number), not needed' -r
complete -c ext4chk -s P -d 'e2fsck\'s process_inode_size: accepted (it must be a number), not needed' -r
complete -c ext4chk -s N -d 'The name to show for the device in messages and progress lines' -r
complete -c ext4chk -s z -l undo -d 'With a repair: save everything overwritten in FILE, in e2fsprogs\' undo format (`e2undo FILE DEVICE` puts it back)' -r
complete -c ext4chk -l threads -d 'Worker threads: a number, or "auto" for every core, giving CPUs back while other programs need them' -r -f -a "auto\t''"
complete -c ext4chk -l format -d 'Report format' -r -f -a "text\t'Findings grouped by pass, then a summary line'
json\t'One JSON document'
junit\t'JUnit XML, for CI systems'"
complete -c ext4chk -l io -d 'I/O path' -r -f -a "auto\t'io_uring when the kernel allows it, else pread'
uring\t'io_uring only'
pread\t'pread only'"
complete -c ext4chk -l direct-io -d 'Read-only checks: read with O_DIRECT, around the page cache (the check reads ahead into memory of its own instead). A repair always reads through the page cache' -r -f -a "auto\t'O_DIRECT for a block device; the page cache for an image file'
on\t'O_DIRECT whenever the file or device takes it'
off\t'Always the page cache'"
complete -c ext4chk -l partition -d 'Check partition N of a whole-disk image or disk (GPT or MBR; numbered from 1)' -r
complete -c ext4chk -l max-freeze -d 'With --online: the longest a freeze may last, in milliseconds' -r
complete -c ext4chk -l log -d 'With --watch: append the JSON lines to FILE instead of standard output' -r
complete -c ext4chk -l on-error -d 'With --watch: run COMMAND (with sh -c) when an online check confirms damage, the check\'s JSON report on its standard input' -r
complete -c ext4chk -l min-interval -d 'With --watch: the least time between two online checks of one file system started by the kernel\'s reports (90s, 10m, 2h, 1d)' -r
complete -c ext4chk -l every -d 'With --watch: also check each watched file system online on this schedule (10m, 6h, 1d), at idle I/O priority' -r
complete -c ext4chk -s p -s a -l preen -d 'Repair what is safe to repair without asking; anything else stops with exit 4 (-a is the same)'
complete -c ext4chk -s n -l read-only -d 'Check without changing anything; the device is opened read-only'
complete -c ext4chk -s y -l repair -d 'Repair every problem found'
complete -c ext4chk -l interactive -d 'Ask about each problem at the terminal before fixing it (what fsck.ext4 and e2fsck do when given none of -n, -p and -y). A summary of the whole repair comes first'
complete -c ext4chk -s f -l force -d 'Check even if the file system is marked clean'
complete -c ext4chk -s c -l check-blocks -d 'Scan the whole device for unreadable blocks and add them to the bad-block list; twice (-cc), a non-destructive read-write test'
complete -c ext4chk -s d -l debug -d 'Debugging output: how the run went (I/O path, threads, scheduling, phase times) on standard error'
complete -c ext4chk -s D -l optimize-dirs -d 'Optimize every directory: rebuild its hash index and compress it'
complete -c ext4chk -s F -l flush -d 'Flush the device\'s buffers before checking'
complete -c ext4chk -s k -l keep-badblocks -d 'With -c: keep the blocks already on the bad-block list'
complete -c ext4chk -s r -d 'Accepted for compatibility with e2fsck (its old "interactive" flag); does nothing'
complete -c ext4chk -s s -d 'Byte-swap the file system (removed from e2fsck): refused, exit 16'
complete -c ext4chk -s S -d 'Byte-swap the whole file system (removed from e2fsck): refused, exit 16'
complete -c ext4chk -s t -l timing -d 'Print timing and memory statistics; twice (-tt), for each phase too'
complete -c ext4chk -s v -l verbose -d 'Print detailed statistics at the end'
complete -c ext4chk -s V -l version -d 'Print the version and exit'
complete -c ext4chk -l nice -d 'Run the workers at idle priority (SCHED_IDLE), so that anything else on the machine comes first'
complete -c ext4chk -l dry-run -d 'With --repair (-y) or --preen (-p): run the repair without writing anything, and report what it would do. The device is opened read-only; every write is kept in memory, where each of the repair\'s checks reads it'
complete -c ext4chk -l online -d 'Check a mounted ext2/3/4 file system while it stays in use: DEVICE is its mount point or its device. Read-only; what the live check finds is confirmed in the file system\'s frozen state before it is reported. Exit codes are e2scrub\'s: 0 clean, 6 damage, 8 could not check'
complete -c ext4chk -l watch -d 'Watch mounted ext2/3/4 file systems for the errors the kernel reports (fanotify FAN_FS_ERROR) and check each one online when it reports one. The arguments are mount points; with none, every mounted ext2/3/4 file system, following mounts and unmounts. Runs until SIGINT or SIGTERM, writing one JSON object per line. Never repairs'
complete -c ext4chk -l keep-fsck-times -d 'With --online: a clean outcome leaves the mount count and the last check time as they are (what --watch runs after a kernel error)'
complete -c ext4chk -l help -d 'Print help'
complete -c fsck.ext4 --wraps ext4chk
complete -c fsck.ext3 --wraps ext4chk
complete -c fsck.ext2 --wraps ext4chk
