# Version 5 in a 32-bit object: 4-byte address fields and SHT_REL relocations, whose
# addend sits in the field itself (llvm-readobj cannot read these; bbmap can).
	.text
	.globl	i_first
	.type	i_first,@function
i_first:
.Lh0:
	movl	4(%esp), %eax
	retl
.Lh0_end:
	.size	i_first, .-i_first
	.globl	i_second
	.type	i_second,@function
i_second:
.Lh1:
	movl	4(%esp), %eax
	testl	%eax, %eax
	je	.Lh1_b1
	addl	%eax, %eax
.Lh1_b0_end:
.Lh1_b1:
	retl
.Lh1_b1_end:
	.size	i_second, .-i_second

	.section	.llvm_bb_addr_map,"o",@0x6fff4c0a,.text
	.byte	5
	.short	0
	.long	.Lh0
	.byte	1
	.byte	0
	.uleb128 0
	.uleb128 .Lh0_end-.Lh0
	.byte	1
	.byte	5
	.short	0
	.long	.Lh1
	.byte	2
	.byte	0
	.uleb128 0
	.uleb128 .Lh1_b0_end-.Lh1
	.byte	8
	.byte	1
	.uleb128 .Lh1_b1-.Lh1_b0_end
	.uleb128 .Lh1_b1_end-.Lh1_b1
	.byte	1
	.section	.note.GNU-stack,"",@progbits
