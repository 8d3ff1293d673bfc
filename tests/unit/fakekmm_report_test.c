/* fake-kmm: a Secure Boot node is the one whose node report says so, in the
 * gpukmm.io/v1alpha1 report and in the release before's. */
#include <criterion/criterion.h>

#include "../../tools/fake-kmm/fakekmm.h"

Test(fakekmm_report, secure_boot_from_either_report_format)
{
	cr_expect(fk_report_secure("{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"kind\":\"NodeReport\",\"secureBoot\":\"true\","
				   "\"lockdown\":\"none\"}"));
	cr_expect_not(fk_report_secure("{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"kind\":\"NodeReport\","
				       "\"secureBoot\":\"false\",\"lockdown\":\"none\"}"));
	cr_expect_not(fk_report_secure("{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"secureBoot\":\"unknown\"}"));
	cr_expect(fk_report_secure("{\"apiVersion\":\"gpukmm.io/v1alpha1\",\"secureBoot\":\"false\",\"lockdown\":\"integrity\"}"));
	cr_expect(fk_report_secure("{\"node_name\":\"n\",\"secure_boot\":\"TRI_YES\"}"));
	cr_expect_not(fk_report_secure("{\"node_name\":\"n\",\"secure_boot\":\"TRI_NO\"}"));
	cr_expect_not(fk_report_secure(NULL));
}
