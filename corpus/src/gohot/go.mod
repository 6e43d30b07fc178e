module bbmap.test/gohot

go 1.19
