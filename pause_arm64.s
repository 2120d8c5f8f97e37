#include "textflag.h"

// func procyield(cycles uint32)
TEXT ·procyield(SB),NOSPLIT,$0-4
	MOVWU	cycles+0(FP), R0
	CBZ	R0, done
again:
	YIELD
	SUBW	$1, R0
	CBNZ	R0, again
done:
	RET
