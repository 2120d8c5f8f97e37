#include "textflag.h"

// func Pause(cycles uint32)
TEXT ·Pause(SB),NOSPLIT,$0-4
	MOVWU	cycles+0(FP), R0
	CBZ	R0, done
again:
	YIELD
	SUBW	$1, R0
	CBNZ	R0, again
done:
	RET
