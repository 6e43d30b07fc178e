module bbmap.test/gosymdump

go 1.19
